//! Types generated from `schemas/reactor.proto`: prost messages with proto3
//! JSON serde impls. Only [`crate::codec`] should need them; the rest of the
//! crate works with core types.

/// Package `reactor.v1`.
#[allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all,
    unreachable_pub,
    unused_qualifications
)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/reactor.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/reactor.v1.serde.rs"));
}
