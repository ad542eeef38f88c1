//! Reactor workers in Rust: register a handler per task, stage or job, and
//! [`Worker::run`] does the part of the worker protocol every worker repeats
//! (the README's "Worker protocol" and "Worker libraries"):
//!
//! - the reply echoes `run_id`, `pass` and `reply_key` (and a stage's
//!   `version`) and goes to the command's `reply_topic`, keyed by
//!   `reply_key`, through the murmur2 partitioner (as Java clients and
//!   Reactor hash), so it reaches the partition that owns the run;
//! - a command's offset is committed only after its reply is delivered; an
//!   undelivered reply is sent again, and a worker stopped meanwhile leaves
//!   the offset uncommitted, so the command is handled again (keep handlers
//!   idempotent, keyed by `run_id` or by what the run carries);
//! - a command past its `deadline` is skipped and logged: Reactor stopped
//!   waiting for that pass (it re-dispatches the run under a new pass or
//!   counts the attempt as failed);
//! - a handler's error (or panic) fails the run with its text;
//! - commands for targets without a handler are skipped (another worker
//!   group may serve them), as are undecodable records; both are logged;
//! - commands come as protobuf or proto3 JSON; a reply uses its command's
//!   format.
//!
//! ```no_run
//! use reactor_worker::{StageResult, Worker};
//!
//! # async fn demo() -> Result<(), reactor_worker::Error> {
//! let worker = Worker::new("localhost:9092", "pricing")
//!     .task("orders_daily", |run| async move {
//!         println!("report over {:?}", run.snapshot);
//!         Ok(())
//!     })
//!     .stage("price", |run| async move {
//!         let price = run.offer.get("price").and_then(|p| p.as_f64()).ok_or("no price")?;
//!         Ok(StageResult {
//!             update: Some(serde_json::json!({"price_predicted": price * 1.1}).as_object().unwrap().clone()),
//!             ..Default::default()
//!         })
//!     });
//! worker.run(reactor_worker::shutdown_signal()).await
//! # }
//! ```
//!
//! One command at a time per worker, in partition order: for more
//! parallelism run more workers in the same group (up to the run topics'
//! partition count).

mod codec;
mod json;
mod runs;
mod worker;

pub use codec::{decode, is_json, BadCommand};
pub use runs::{
    JobResult, NextJob, Position, Run, RunInfo, StageResult, StageRun, StepRun, TaskRun,
};
pub use worker::{shutdown_signal, Error, HandlerError, Reply, Worker};

/// Types generated from `schemas/reactor.proto` (package `reactor.v1`):
/// prost messages with proto3 JSON serde impls, for producing and
/// consuming Reactor's other topics too.
#[allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all,
    unreachable_pub,
    unused_qualifications
)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/reactor.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/reactor.v1.serde.rs"));
}
