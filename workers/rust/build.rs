//! Compiles `schemas/reactor.proto` into Rust types (prost) with proto3 JSON
//! serde impls (pbjson), using protox so that building needs no `protoc`.
//! The same schema and generator settings as the reactor crate, except that
//! JSON input skips unknown fields: a newer Reactor's fields do not break an
//! older worker (protobuf skips them anyway).

use std::error::Error;

const PROTO_DIR: &str = "../../schemas";
const PROTO_FILE: &str = "reactor.proto";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed={PROTO_DIR}/{PROTO_FILE}");

    let mut compiler = protox::Compiler::new([PROTO_DIR])?;
    compiler
        .include_source_info(true) // comments become doc comments
        .include_imports(true) // pbjson needs the well-known types' descriptors
        .open_file(PROTO_FILE)?;
    let encoded = compiler.encode_file_descriptor_set();
    let descriptors = compiler.file_descriptor_set();

    // pbjson-types instead of prost-types: its Timestamp, Struct and Value
    // have proto3 JSON serde impls.
    prost_build::Config::new()
        .compile_well_known_types()
        .extern_path(".google.protobuf", "::pbjson_types")
        .btree_map(["."])
        .compile_fds(descriptors)?;

    pbjson_build::Builder::new()
        .register_descriptors(&encoded)?
        .btree_map(["."])
        .preserve_proto_field_names()
        .ignore_unknown_fields()
        .build(&[".reactor.v1"])?;
    Ok(())
}
