//! The wire format: the only module that knows how records are encoded.
//! Decoders turn Kafka values into core types and encoders turn core types
//! into Kafka values; the schema is `schemas/reactor.proto` (see
//! [`crate::proto`]).
//!
//! Inputs may be protobuf or the proto3 JSON mapping of the same message,
//! told apart by their first non-blank byte (`{` is JSON). JSON input takes
//! field names as in the schema (`run_id`) or in lowerCamelCase (`runId`),
//! enums by name or number, timestamps as RFC 3339 strings, and rejects
//! unknown fields. Outputs are protobuf or JSON per topic ([`Format`]); JSON
//! output uses the schema's names and omits default values. Changelog
//! records are always written as protobuf.
//!
//! Every decoder fails with a [`DecodeError`] whose text says what to fix; a
//! failed record is poison and goes to the dead-letter topic. What makes a
//! decoded input acceptable is in [`validate`] (shared with `reactor
//! simulate`), and what one input may carry in [`limits`]. Every input also
//! accepts Confluent Schema Registry framing.

mod changelog;
mod command;
mod ctl;
mod error;
mod event;
mod frame;
mod input_plain;
mod json;
pub mod limits;
mod mark;
mod offer;
mod offer_record;
mod plain;
mod process;
mod put;
mod record;
mod result;
mod run;
mod struct_plain;
mod structs;
mod task_plain;
mod task_record;
mod time;
pub mod trace;
pub mod validate;
mod wire;

#[cfg(test)]
pub(crate) use offer_record::offer_bytes_as_prost;
#[cfg(test)]
pub(crate) use offer_record::offer_written_as_prost as offer_record_written_as_prost;
#[cfg(test)]
pub(crate) use process::written_as_prost as key_record_written_as_prost;

#[cfg(test)]
mod tests;

pub use changelog::{
    changelog_key, decode_changelog, encode_changelog, encode_value_into, put_changelog_key,
    read_changelog_key,
};
pub use command::{decode_command, encode_command};
pub use ctl::{
    decode_ctl_change, encode_ctl_change, plain_ctl, read_ctl_change, read_known_ctl_change,
    read_known_plain_ctl, CtlChange, CtlRecord, PlainCtl,
};
pub use error::DecodeError;
pub use event::{decode_event, encode_event, encode_event_into, event_kind};
pub use json::{to_json, MessageKind};
pub use mark::{decode_ctl_dead_mark, encode_ctl_dead_mark};
pub use offer::{
    decode_offer_change, decode_offer_state, encode_offer_change, encode_offer_state,
    encode_offer_state_into,
};
pub use offer_record::{decode_offer_record, encode_offer_fields, OfferFields};
pub use record::decode_event_record;
pub use result::{decode_run_result, encode_run_result};
pub use run::{
    decode_run_command, decode_stage_run_command, decode_step_run_command, encode_run_command,
    encode_run_command_into, encode_stage_run_command, encode_stage_run_command_into,
    encode_step_run_command, encode_step_run_command_into, KIND_STAGE, KIND_STEP, KIND_TASK,
};
pub use task_record::{
    decode_task_record, encode_task_fields, read_task_record, TaskFields, TaskValues,
};
pub use time::{timestamp_from_proto, timestamp_to_proto, ParamKey};
pub use wire::{is_json, Format};
