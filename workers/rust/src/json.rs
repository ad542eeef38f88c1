//! JSON values between `serde_json` (what handlers see) and the
//! `google.protobuf.Struct` / `Value` / `Timestamp` of the wire.

use jiff::Timestamp;
use pbjson_types::value::Kind;
use serde_json::{Map, Number, Value};

/// Doubles represent integers exactly up to 2^53.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// A `Value` as JSON; an integral number as the integer, as Reactor reads it.
pub(crate) fn from_value(v: pbjson_types::Value) -> Result<Value, String> {
    Ok(match v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        Some(Kind::NumberValue(f)) => number(f)?,
        Some(Kind::StringValue(s)) => Value::String(s),
        Some(Kind::ListValue(l)) => Value::Array(
            l.values
                .into_iter()
                .map(from_value)
                .collect::<Result<_, _>>()?,
        ),
        Some(Kind::StructValue(s)) => Value::Object(from_struct(s)?),
    })
}

fn number(f: f64) -> Result<Value, String> {
    if f.fract() == 0.0 && f.abs() <= EXACT {
        // Exact: |f| ≤ 2^53 and integral.
        #[allow(clippy::cast_possible_truncation)]
        return Ok(Value::Number(Number::from(f as i64)));
    }
    Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| format!("{f} is not a JSON number"))
}

/// A `Struct` as a JSON object, members in key order.
pub(crate) fn from_struct(s: pbjson_types::Struct) -> Result<Map<String, Value>, String> {
    let mut members: Vec<_> = s.fields.into_iter().collect();
    members.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    members
        .into_iter()
        .map(|(k, v)| Ok((k, from_value(v)?)))
        .collect()
}

/// JSON as a `Value`.
pub(crate) fn to_value(v: &Value) -> pbjson_types::Value {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        // Always `Some` without serde_json's `arbitrary_precision`.
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(items.iter().map(to_value).collect()),
        Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    kind.into()
}

/// A JSON object as a `Struct`.
pub(crate) fn to_struct(map: &Map<String, Value>) -> pbjson_types::Struct {
    map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect()
}

/// A wire timestamp as a `jiff` one.
pub(crate) fn from_timestamp(t: &pbjson_types::Timestamp) -> Result<Timestamp, String> {
    Timestamp::new(t.seconds, t.nanos).map_err(|e| format!("bad timestamp: {e}"))
}

/// A `jiff` timestamp on the wire.
pub(crate) fn to_timestamp(t: Timestamp) -> pbjson_types::Timestamp {
    pbjson_types::Timestamp {
        seconds: t.as_second(),
        nanos: t.subsec_nanosecond(),
    }
}
