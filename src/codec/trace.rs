//! W3C trace context (<https://www.w3.org/TR/trace-context/>): the
//! `traceparent` and `tracestate` headers of an input record are carried to
//! every record it causes (run commands, events, offer states, forwarded
//! inputs), so that a user's tracing follows a change through Reactor into
//! the worker, and the worker's reply on into the next step.
//!
//! Only a well-formed `traceparent` is carried, and `tracestate` only with
//! one: a malformed header is dropped, never copied onto Reactor's outputs.

/// Headers carried from an input to the records it causes, in order.
pub type Trace = Vec<(String, Vec<u8>)>;

/// The `traceparent` header.
pub const TRACEPARENT: &str = "traceparent";
/// The `tracestate` header.
pub const TRACESTATE: &str = "tracestate";
/// The longest `tracestate` carried (the W3C limit is 512 characters).
const MAX_TRACESTATE: usize = 512;

/// The trace context among `headers` (the first of each name), if its
/// `traceparent` is well formed.
pub fn extract<'a>(headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Trace {
    let mut parent = None;
    let mut state = None;
    for (name, value) in headers {
        if parent.is_none() && name.eq_ignore_ascii_case(TRACEPARENT) {
            parent = Some(value);
        } else if state.is_none() && name.eq_ignore_ascii_case(TRACESTATE) {
            state = Some(value);
        }
    }
    let Some(parent) = parent.filter(|p| is_traceparent(p)) else {
        return Trace::new();
    };
    let mut trace = vec![(TRACEPARENT.to_string(), parent.to_vec())];
    if let Some(state) = state.filter(|s| is_tracestate(s)) {
        trace.push((TRACESTATE.to_string(), state.to_vec()));
    }
    trace
}

/// `version-traceid-parentid-flags`, lowercase hex, neither id all zeros;
/// a version other than `00` may append fields after the flags.
fn is_traceparent(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    let fields: Vec<&str> = text.split('-').collect();
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    match fields.as_slice() {
        [version, trace, parent, flags, rest @ ..] => {
            hex(version, 2)
                && *version != "ff"
                && (rest.is_empty() || *version != "00")
                && hex(trace, 32)
                && nonzero(trace)
                && hex(parent, 16)
                && nonzero(parent)
                && hex(flags, 2)
        }
        _ => false,
    }
}

/// Printable ASCII within the W3C length limit.
fn is_tracestate(value: &[u8]) -> bool {
    value.len() <= MAX_TRACESTATE && value.iter().all(|b| (0x20..0x7f).contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers<'a>(h: &'a [(&'a str, &'a str)]) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        h.iter().map(|(k, v)| (*k, v.as_bytes()))
    }

    #[test]
    fn a_valid_context_is_carried_with_its_state() {
        let trace = extract(headers(&[
            ("x", "y"),
            ("traceparent", PARENT),
            ("tracestate", "congo=t61rcWkgMzE"),
        ]));
        assert_eq!(
            trace,
            vec![
                ("traceparent".to_string(), PARENT.as_bytes().to_vec()),
                ("tracestate".to_string(), b"congo=t61rcWkgMzE".to_vec()),
            ]
        );
    }

    #[test]
    fn malformed_contexts_are_dropped() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-ab-cd-01",
        ] {
            assert!(
                extract(headers(&[("traceparent", bad), ("tracestate", "a=b")])).is_empty(),
                "{bad:?}"
            );
        }
        // A later version may add fields.
        let future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what";
        assert_eq!(extract(headers(&[("traceparent", future)])).len(), 1);
        // A state without a parent, or an unprintable one, is not carried.
        assert!(extract(headers(&[("tracestate", "a=b")])).is_empty());
        let trace = extract(headers(&[
            ("traceparent", PARENT),
            ("tracestate", "a=\u{1}"),
        ]));
        assert_eq!(trace.len(), 1);
    }
}
