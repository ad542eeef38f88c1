//! Properties every decoder shares: no input makes one panic.

use proptest::prelude::*;

use super::*;

/// JSON values nested up to four deep: numbers from `number`, strings
/// and object keys matching `string` and `key`.
pub(super) fn json_with(
    number: BoxedStrategy<serde_json::Value>,
    string: &'static str,
    key: &'static str,
) -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        string.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::vec((key, inner), 0..8)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Runs every decoder on `bytes`; each may fail but must return.
fn decode_all(bytes: &[u8]) {
    let _ = decode_ctl_change(bytes);
    let _ = decode_run_result(bytes);
    let _ = decode_command(bytes);
    let _ = decode_run_command(bytes);
    let _ = decode_event(bytes);
    let _ = decode_stage_run_command(bytes);
    let _ = decode_offer_change(Some(b"o1"), Some(bytes));
    let _ = decode_offer_change(Some(bytes), None);
    let _ = decode_offer_state(bytes);
    let _ = decode_changelog(b"task/t", Some(bytes));
    let _ = decode_changelog(b"offer/o1", Some(bytes));
    let _ = decode_changelog(b"rescan/price", Some(bytes));
    let _ = decode_changelog(bytes, None);
    for &kind in MessageKind::ALL {
        let _ = to_json(kind, bytes);
    }
}

#[test]
fn garbage_is_an_error() {
    for bytes in [
        &b"\xff\xff\xff\xff"[..],
        b"{",
        b"   {\"entity\": 1}",
        b"{\"entity\":\"a\",\"param\":\"b\",\"value\":\"2021-04-25T03:27:33Z\"} trailing",
        b"\x0a\xff\xff\xff\xff\x0f",
    ] {
        assert!(decode_ctl_change(bytes).is_err(), "{bytes:?}");
        assert!(decode_run_result(bytes).is_err(), "{bytes:?}");
        assert!(decode_command(bytes).is_err(), "{bytes:?}");
        assert!(decode_event(bytes).is_err(), "{bytes:?}");
        assert!(decode_run_command(bytes).is_err(), "{bytes:?}");
        assert!(decode_stage_run_command(bytes).is_err(), "{bytes:?}");
        assert!(
            decode_offer_change(Some(b"o1"), Some(bytes)).is_err(),
            "{bytes:?}"
        );
        assert!(decode_offer_state(bytes).is_err(), "{bytes:?}");
    }
}

/// A valid record of one of a few kinds, with nested JSON values.
fn valid_record(which: usize, format: Format) -> Vec<u8> {
    let body = serde_json::json!({"status": "active", "price": 100.5, "tags": ["a", {"b": null}]})
        .as_object()
        .unwrap()
        .clone();
    match which {
        0 => {
            let record = CtlRecord {
                entity: "dwh.orders".into(),
                param: "max_dt".into(),
                value: "2021-04-25T03:27:33Z".parse().unwrap(),
            };
            encode_ctl_change(&record, None, "t", format)
        }
        1 => encode_offer_change(
            &crate::offer::OfferChange {
                offer_id: "o1".into(),
                change: crate::offer::Change::Patch(body),
                source: None,
            },
            format,
        ),
        _ => encode_stage_run_command(
            &crate::action::StageRunCommand {
                stage: "price".into(),
                offer: "o1".into(),
                run_id: "price/o1#1".into(),
                attempt: 1,
                pass: 1,
                version: 1,
                body: body.into(),
                state: Some(serde_json::json!({"model": [1, 2]}).into()),
                deadline: "2024-06-01T00:00:00Z".parse().unwrap(),
                topic: "".into(),
                source: None,
            },
            "reactor.results",
            "2024-06-01T00:00:00Z".parse().unwrap(),
            format,
        ),
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        decode_all(&bytes);
    }

    #[test]
    fn arbitrary_json_like_text_never_panics(text in r#"[ \n]?\{[a-zA-Z_":,{}\[\]0-9.\- ]{0,80}"#) {
        decode_all(text.as_bytes());
    }

    #[test]
    fn mutated_valid_records_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        json in any::<bool>(),
        which in 0..3usize,
    ) {
        let format = if json { Format::Json } else { Format::Protobuf };
        let mut bytes = valid_record(which, format);
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        decode_all(&bytes);
    }
}
