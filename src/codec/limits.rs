//! What one input may carry. The limits bound every output an input can
//! cause (a run command carries the offer body and a state; an `OfferState`
//! the body and every stage's state; a changelog record the same), so that
//! no accepted input can make a record Reactor must produce larger than the
//! producer accepts (`message.max.bytes`): such a record would abort every
//! transaction that carries it, for ever. An input over a limit is
//! rejected with a reason naming the limit.
//!
//! Sizes are counted in bytes of compact JSON (what the core holds), and
//! nesting in levels of arrays and objects.

use serde_json::Value;

use super::error::DecodeError;

/// Largest input record (key and value together) Reactor accepts: well
/// under the producer limit, so that a record that must be forwarded to the
/// partition owning its key (a producer without the murmur2 partitioner)
/// can always be forwarded.
pub const MAX_INPUT_BYTES: usize = 512 * 1024;

/// Largest offer body (also after a patch is applied), patch or stage
/// update, as compact JSON.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// Largest stage state of one offer, as compact JSON.
pub const MAX_STATE_BYTES: usize = 16 * 1024;

/// Deepest nesting of arrays and objects in a body, patch, update or state.
pub const MAX_JSON_DEPTH: usize = 32;

/// Longest name or id: entity, parameter, task, stage, offer id, run id.
pub const MAX_NAME_BYTES: usize = 512;

/// Longest worker error text kept; a longer one is cut (it is only shown).
pub const MAX_ERROR_BYTES: usize = 4096;

/// The producer's `message.max.bytes` when `[kafka.librdkafka]` does not
/// set it (librdkafka's default).
pub const DEFAULT_MAX_RECORD_BYTES: usize = 1_000_000;

/// Room for everything in an output record besides bodies and states:
/// ids, timestamps, field tags, headers and the record overhead.
const OUTPUT_OVERHEAD_BYTES: usize = 64 * 1024;

/// Checks that the largest outputs accepted inputs can cause fit in a record
/// of `max_record_bytes` with `stages` stages: an `OfferState` (and an offer's
/// changelog record) carries the body and one state per stage. Returns why
/// not, for a refusal to start.
pub fn check_outputs_fit(stages: usize, max_record_bytes: usize) -> Result<(), String> {
    let largest = MAX_BODY_BYTES + stages * MAX_STATE_BYTES + OUTPUT_OVERHEAD_BYTES;
    if largest > max_record_bytes {
        return Err(format!(
            "with {stages} stages an offer's state may take {largest} bytes (body {MAX_BODY_BYTES}, \
             {MAX_STATE_BYTES} per stage state, {OUTPUT_OVERHEAD_BYTES} for the rest), more than \
             the producer's message.max.bytes = {max_record_bytes}; raise message.max.bytes under \
             [kafka.librdkafka] (and the brokers' max.message.bytes) or use fewer stages"
        ));
    }
    Ok(())
}

/// Fails when the record's key and value together exceed [`MAX_INPUT_BYTES`].
pub fn check_record(key: Option<&[u8]>, payload: Option<&[u8]>) -> Result<(), DecodeError> {
    let size = key.map_or(0, <[u8]>::len) + payload.map_or(0, <[u8]>::len);
    if size > MAX_INPUT_BYTES {
        return Err(DecodeError::RecordTooLarge {
            size,
            limit: MAX_INPUT_BYTES,
        });
    }
    Ok(())
}

/// Fails when `text` (a name or id in `field`) is longer than [`MAX_NAME_BYTES`].
pub fn check_name(field: &'static str, text: &str) -> Result<(), DecodeError> {
    if text.len() > MAX_NAME_BYTES {
        return Err(DecodeError::FieldTooLarge {
            field,
            size: text.len(),
            limit: MAX_NAME_BYTES,
        });
    }
    Ok(())
}

/// Fails when `value` nests deeper than [`MAX_JSON_DEPTH`] or takes more
/// than `max_bytes` as compact JSON.
pub fn check_json(field: &'static str, value: &Value, max_bytes: usize) -> Result<(), DecodeError> {
    let depth = depth(value);
    if depth > MAX_JSON_DEPTH {
        return Err(DecodeError::TooDeep {
            field,
            depth,
            limit: MAX_JSON_DEPTH,
        });
    }
    let size = json_size(value);
    if size > max_bytes {
        return Err(DecodeError::FieldTooLarge {
            field,
            size,
            limit: max_bytes,
        });
    }
    Ok(())
}

/// [`check_json`] of an object's members, as the object they form.
pub fn check_object(
    field: &'static str,
    members: &serde_json::Map<String, Value>,
    max_bytes: usize,
) -> Result<(), DecodeError> {
    let depth = object_depth(members);
    if depth > MAX_JSON_DEPTH {
        return Err(DecodeError::TooDeep {
            field,
            depth,
            limit: MAX_JSON_DEPTH,
        });
    }
    let size = object_size(members);
    if size > max_bytes {
        return Err(DecodeError::FieldTooLarge {
            field,
            size,
            limit: max_bytes,
        });
    }
    Ok(())
}

/// Nesting of the object `members` form (one level for the object itself).
pub fn object_depth(members: &serde_json::Map<String, Value>) -> usize {
    1 + deepest(members.values())
}

/// Bytes of the compact JSON of the object `members` form.
pub fn object_size(members: &serde_json::Map<String, Value>) -> usize {
    frame_size(members) + sizes(members.values())
}

/// Bytes of an object's JSON besides its values: braces, keys, colons and
/// commas.
fn frame_size(members: &serde_json::Map<String, Value>) -> usize {
    2 + members.keys().map(|k| string_size(k) + 1).sum::<usize>() + members.len().saturating_sub(1)
}

/// Cuts `text` to at most `max` bytes on a char boundary, marking the cut
/// with `…`.
pub fn truncate_text(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}

/// Levels of arrays and objects in `value` (a scalar is 0), without
/// recursion: a value may come from anywhere.
fn depth(value: &Value) -> usize {
    deepest(std::iter::once(value))
}

/// The most levels of arrays and objects in any of `values`.
fn deepest<'v>(values: impl Iterator<Item = &'v Value>) -> usize {
    fn push<'v>(stack: &mut Vec<(&'v Value, usize)>, v: &'v Value, d: usize) {
        // Scalars are never pushed: most members of a body are scalars.
        if v.is_array() || v.is_object() {
            stack.push((v, d + 1));
        }
    }
    let mut deepest = 0;
    let mut stack = Vec::new();
    values.for_each(|v| push(&mut stack, v, 0));
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => items.iter().for_each(|c| push(&mut stack, c, d)),
            Value::Object(map) => map.values().for_each(|c| push(&mut stack, c, d)),
            _ => {}
        }
    }
    deepest
}

/// Bytes of `value` as compact JSON, without recursion and without writing it.
fn json_size(value: &Value) -> usize {
    sizes(std::iter::once(value))
}

/// Bytes of all `values` as compact JSON (nothing between them).
fn sizes<'v>(values: impl Iterator<Item = &'v Value>) -> usize {
    // Only arrays and objects wait on the stack: scalars are counted at once.
    fn count<'v>(stack: &mut Vec<&'v Value>, v: &'v Value) -> usize {
        match v {
            Value::Array(_) | Value::Object(_) => {
                stack.push(v);
                0
            }
            scalar => scalar_size(scalar),
        }
    }
    let mut stack = Vec::new();
    let mut size: usize = values.map(|v| count(&mut stack, v)).sum();
    while let Some(v) = stack.pop() {
        size += match v {
            Value::Array(items) => {
                2 + items.len().saturating_sub(1)
                    + items.iter().map(|c| count(&mut stack, c)).sum::<usize>()
            }
            Value::Object(map) => {
                frame_size(map) + map.values().map(|c| count(&mut stack, c)).sum::<usize>()
            }
            scalar => scalar_size(scalar),
        };
    }
    size
}

/// Bytes of a scalar as JSON.
fn scalar_size(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            let digits = |u: u64| u.checked_ilog10().map_or(1, |l| l as usize + 1);
            if let Some(u) = n.as_u64() {
                digits(u)
            } else if let Some(i) = n.as_i64() {
                1 + digits(i.unsigned_abs())
            } else {
                // A float: written as serde_json writes it, counted instead of kept.
                let mut counter = Counter(0);
                let _ = std::fmt::Write::write_fmt(&mut counter, format_args!("{n}"));
                counter.0
            }
        }
        Value::String(s) => string_size(s),
        Value::Array(_) | Value::Object(_) => 0,
    }
}

/// Counts the bytes written to it.
struct Counter(usize);

impl std::fmt::Write for Counter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

/// Bytes of `s` as a JSON string literal: escapes take two bytes (`\n`),
/// other control characters six (`\u0001`).
fn string_size(s: &str) -> usize {
    2 + s.len()
        + s.bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0..0x20 => 5,
                _ => 0,
            })
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_are_those_of_compact_json() {
        for v in [
            json!(null),
            json!(true),
            json!(false),
            json!(-12.5),
            json!(18446744073709551615u64),
            json!(0),
            json!(9),
            json!(10),
            json!(-1),
            json!(-10),
            json!(i64::MIN),
            json!(1e300),
            json!(0.1),
            json!("a\"b\\c\n\u{1}é"),
            json!([]),
            json!({}),
            json!([1, [2, {"k": [null, "x"]}], {"a": {}, "b\n": false}]),
        ] {
            assert_eq!(
                json_size(&v),
                serde_json::to_string(&v).unwrap().len(),
                "{v}"
            );
        }
        let object = json!({"a": 1, "b": [true, {"c": "d"}]});
        let members = object.as_object().unwrap();
        check_object(
            "body",
            members,
            serde_json::to_string(&object).unwrap().len(),
        )
        .unwrap();
        assert!(check_object(
            "body",
            members,
            serde_json::to_string(&object).unwrap().len() - 1
        )
        .is_err());
    }

    #[test]
    fn depth_counts_levels() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!([])), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        let mut deep = json!(0);
        for _ in 0..10_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(depth(&deep), 10_000);
        let err = check_json("state", &deep, MAX_STATE_BYTES).unwrap_err();
        assert_eq!(
            err.to_string(),
            "field `state`: nested 10000 levels deep, over the limit of 32"
        );
        // Dropping it recursively would overflow a test thread's stack.
        std::mem::forget(deep);
    }

    #[test]
    fn limits_name_themselves() {
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(
            check_name("offer_id", &long).unwrap_err().to_string(),
            "field `offer_id`: 513 bytes, over the limit of 512"
        );
        check_name("offer_id", &long[1..]).unwrap();
        let big = vec![0u8; MAX_INPUT_BYTES];
        assert!(check_record(None, Some(&big)).is_ok());
        assert_eq!(
            check_record(Some(b"k"), Some(&big))
                .unwrap_err()
                .to_string(),
            "the record (key and value) is 524289 bytes, over the input limit of 524288"
        );
    }

    #[test]
    fn truncation_keeps_whole_chars() {
        let mut s = "ééé".to_string();
        truncate_text(&mut s, 5);
        assert_eq!(s, "é…");
        let mut short = "abc".to_string();
        truncate_text(&mut short, 3);
        assert_eq!(short, "abc");
    }

    #[test]
    fn outputs_fit_the_default_producer_limit() {
        check_outputs_fit(10, DEFAULT_MAX_RECORD_BYTES).unwrap();
        let err = check_outputs_fit(100, DEFAULT_MAX_RECORD_BYTES).unwrap_err();
        assert!(err.contains("message.max.bytes = 1000000"), "{err}");
    }
}
