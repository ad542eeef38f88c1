//! Compiles `schemas/reactor.proto` into Rust types (prost) with proto3 JSON
//! serde impls (pbjson), using protox so that building needs no `protoc`.

use std::error::Error;

const PROTO_DIR: &str = "schemas";
const PROTO_FILE: &str = "reactor.proto";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed={PROTO_DIR}/{PROTO_FILE}");

    let mut compiler = protox::Compiler::new([PROTO_DIR])?;
    compiler
        .include_source_info(true) // comments become doc comments
        .include_imports(true) // pbjson needs the well-known types' descriptors
        .open_file(PROTO_FILE)?;
    let encoded = compiler.encode_file_descriptor_set();
    // Includes the well-known types: prost-build reads their descriptors to
    // decide which derives our messages get, and generates nothing for them
    // since `extern_path` maps them to pbjson-types.
    let descriptors = compiler.file_descriptor_set();

    // BTreeMap everywhere: map entries are then encoded in key order, so the
    // same state always gives the same bytes (a batch redone after a crash
    // writes identical records).
    // `compile_well_known_types` drops prost-build's default mapping to
    // prost-types, whose Timestamp has no proto3 JSON serde impls.
    prost_build::Config::new()
        .compile_well_known_types()
        .extern_path(".google.protobuf", "::pbjson_types")
        .btree_map(["."])
        .compile_fds(descriptors)?;

    // pbjson-build maps `.google.protobuf` to pbjson-types by itself.
    pbjson_build::Builder::new()
        .register_descriptors(&encoded)?
        .btree_map(["."])
        .preserve_proto_field_names()
        .build(&[".reactor.v1"])?;
    Ok(())
}
