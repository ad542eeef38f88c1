//! Any Reactor record as proto3 JSON, whatever its encoding: what
//! `reactor tail` prints.

use serde::{Deserialize, Serialize};

use super::error::DecodeError;
use super::wire::decode;
use crate::changelog::Store;
use crate::proto::v1;

/// The message type of a record, named as in the schema (`run_result`, on
/// the command line and in logs).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum MessageKind {
    /// `CtlChange`, on `ctl.changes`.
    CtlChange,
    /// `RunCommand`, on run topics.
    RunCommand,
    /// `RunResult`, on `reactor.results`.
    RunResult,
    /// `Event`, on `reactor.events`.
    Event,
    /// `Command`, on `reactor.commands`.
    Command,
    /// `TaskRecord`, a `task/…` value on `reactor.changelog`.
    TaskRecord,
    /// `OfferChange`, on `offer.changes`.
    OfferChange,
    /// `OfferState`, on `offer.state`.
    OfferState,
    /// `OfferRecord`, an `offer/…` value on `reactor.changelog`.
    OfferRecord,
    /// `RescanRecord`, a `rescan/…` value on `reactor.changelog`.
    RescanRecord,
    /// `KeyRecord`, a `process/…` value on `reactor.changelog`.
    KeyRecord,
    /// `ScheduleRecord`, a `schedule/…` value on `reactor.changelog`.
    ScheduleRecord,
    /// `SeqRecord`, a `seq/…` value on `reactor.changelog`.
    SeqRecord,
    /// `RecoveryRecord`, a `recovery/…` value on `reactor.changelog`.
    RecoveryRecord,
}

impl MessageKind {
    /// Every kind.
    pub const ALL: &'static [MessageKind] = <MessageKind as strum::VariantArray>::VARIANTS;

    /// Name on the command line and in logs (`run_result`).
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The kind named `name` (as [`Self::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        name.parse().ok()
    }

    /// The kind of the values of changelog `store`.
    pub fn of_store(store: Store) -> MessageKind {
        match store {
            Store::Task => MessageKind::TaskRecord,
            Store::Offer => MessageKind::OfferRecord,
            Store::Rescan => MessageKind::RescanRecord,
            Store::Process => MessageKind::KeyRecord,
            Store::Schedule => MessageKind::ScheduleRecord,
            Store::Seq => MessageKind::SeqRecord,
            Store::Recovery => MessageKind::RecoveryRecord,
        }
    }
}

/// Decodes a record of `kind` from either encoding and renders it as proto3
/// JSON with the schema's field names. Only the encoding is checked, not the
/// content, so that a record the engine would reject can still be shown.
pub fn to_json(kind: MessageKind, bytes: &[u8]) -> Result<serde_json::Value, DecodeError> {
    match kind {
        MessageKind::CtlChange => render::<v1::CtlChange>(bytes),
        MessageKind::RunCommand => render::<v1::RunCommand>(bytes),
        MessageKind::RunResult => render::<v1::RunResult>(bytes),
        MessageKind::Event => render::<v1::Event>(bytes),
        MessageKind::Command => render::<v1::Command>(bytes),
        MessageKind::TaskRecord => render::<v1::TaskRecord>(bytes),
        MessageKind::OfferChange => render::<v1::OfferChange>(bytes),
        MessageKind::OfferState => render::<v1::OfferState>(bytes),
        MessageKind::OfferRecord => render::<v1::OfferRecord>(bytes),
        MessageKind::RescanRecord => render::<v1::RescanRecord>(bytes),
        MessageKind::KeyRecord => render::<v1::KeyRecord>(bytes),
        MessageKind::ScheduleRecord => render::<v1::ScheduleRecord>(bytes),
        MessageKind::SeqRecord => render::<v1::SeqRecord>(bytes),
        MessageKind::RecoveryRecord => render::<v1::RecoveryRecord>(bytes),
    }
}

fn render<M>(bytes: &[u8]) -> Result<serde_json::Value, DecodeError>
where
    M: prost::Message + Default + serde::de::DeserializeOwned + Serialize,
{
    let message: M = decode(bytes)?;
    // Protobuf may carry values JSON cannot show (an unknown enum number, a
    // timestamp beyond year 9999).
    serde_json::to_value(&message).map_err(|e| DecodeError::Json(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{encode_run_result, Format};
    use crate::engine::RunResult;
    use crate::run::Status;

    #[test]
    fn names() {
        for &k in MessageKind::ALL {
            assert_eq!(MessageKind::from_name(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert_eq!(MessageKind::from_name("nope"), None);
    }

    #[test]
    fn renders_either_encoding_alike() {
        let r = RunResult {
            step: Default::default(),
            stage: Default::default(),
            run_id: "t#1".into(),
            pass: 3,
            status: Status::Succeeded,
            error: None,
        };
        let expected = serde_json::json!({
            "run_id": "t#1",
            "pass": "3",
            "reply_key": "p",
            "status": "RUN_STATUS_SUCCEEDED",
        });
        for format in [Format::Protobuf, Format::Json] {
            let bytes = encode_run_result(&r, "p", format);
            assert_eq!(to_json(MessageKind::RunResult, &bytes).unwrap(), expected);
        }
        // Not validated: an unspecified status still shows.
        let json = to_json(MessageKind::RunResult, br#"{"runId":"x"}"#).unwrap();
        assert_eq!(json, serde_json::json!({"run_id": "x"}));
    }

    #[test]
    fn unrenderable_protobuf_is_an_error() {
        let bytes = prost::Message::encode_to_vec(&v1::RunResult {
            status: 42,
            ..Default::default()
        });
        assert!(to_json(MessageKind::RunResult, &bytes)
            .unwrap_err()
            .to_string()
            .starts_with("json: "));
    }
}
