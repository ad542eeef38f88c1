//! Properties every decoder shares: no input makes one panic.

use proptest::prelude::*;

use super::*;

/// Runs every decoder on `bytes`; each may fail but must return.
fn decode_all(bytes: &[u8]) {
    let _ = decode_ctl_change(bytes);
    let _ = decode_run_result(bytes);
    let _ = decode_command(bytes);
    let _ = decode_run_command(bytes);
    let _ = decode_event(bytes);
    let _ = decode_changelog(b"task/t", Some(bytes));
    let _ = decode_changelog(bytes, None);
    for kind in MessageKind::ALL {
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
    ) {
        let format = if json { Format::Json } else { Format::Protobuf };
        let record = CtlRecord {
            entity: "dwh.orders".into(),
            param: "max_dt".into(),
            value: "2021-04-25T03:27:33Z".parse().unwrap(),
        };
        let mut bytes = encode_ctl_change(&record, None, "t", format);
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        decode_all(&bytes);
    }
}
