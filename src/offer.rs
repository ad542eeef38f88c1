//! Offers: JSON-object entities that stages watch and change. This module
//! holds the pure data rules every part agrees on: what a change is, how a
//! JSON merge patch (RFC 7396) applies, which fields a change touched, and
//! the number normalisation that keeps protobuf and JSON inputs comparable.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An offer's body: always a JSON object.
pub type Body = Map<String, Value>;

/// A body shared by the offer and everything that carries it at one
/// version (its changelog record, offer state, stage run commands): a
/// change makes a new one, so nothing copies a body to send or store it.
pub type SharedBody = std::sync::Arc<Body>;

/// `body` shared ([`SharedBody`]) with its maps sized to what they hold: a
/// map built or patched entry by entry keeps up to twice the room it needs
/// (its entries and its hash index grow by doubling), and a shard keeps a
/// body and a stage state per offer for as long as the offer lives.
pub fn share(body: Body) -> SharedBody {
    SharedBody::new(compact_map(body))
}

/// `value` with every object and array in it sized to what it holds (see
/// [`share`]).
pub fn compact(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(compact_map(map)),
        Value::Array(items) => {
            let mut items: Vec<Value> = items.into_iter().map(compact).collect();
            items.shrink_to_fit();
            Value::Array(items)
        }
        other => other,
    }
}

fn compact_map(map: Body) -> Body {
    // serde_json's map can neither say nor shrink its capacity: moved into
    // one made for its length (the values move; only the map is new).
    let mut sized = Body::with_capacity(map.len());
    for (key, value) in map {
        sized.insert(key, compact(value));
    }
    sized
}

/// A change of one offer from outside (the system of record, any producer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OfferChange {
    /// The offer id: its Kafka key and partition key.
    pub offer_id: String,
    /// What changes.
    pub change: Change,
    /// Who made the change (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// The three ways an offer changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Replace the whole body (creates the offer when it is new).
    Body(Body),
    /// Apply a JSON merge patch (RFC 7396) to the body (a new offer starts from `{}`).
    Patch(Body),
    /// Delete the offer: its queue entries and timers are cancelled.
    Deleted,
}

/// Applies an RFC 7396 merge patch to `target` in place: `null` removes a
/// member, an object merges recursively, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if let Value::Object(target) = target {
        merge_object(target, patch);
    } else {
        let mut object = Map::new();
        merge_object(&mut object, patch);
        *target = Value::Object(object);
    }
}

/// [`merge_patch`] of an object into an object.
fn merge_object(target: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The body after applying `patch` (an object) to `body`, its maps sized
/// to what they hold (as [`share`] makes them). A patch that removes no
/// member of `body` (the usual stage update) is applied in one pass into a
/// map made for the result, where cloning the body, patching the clone and
/// compacting that copied the body twice.
pub fn patched(body: &Body, patch: &Body) -> Body {
    let mut len = body.len();
    for (key, value) in patch {
        match (body.contains_key(key), value.is_null()) {
            (true, true) => {
                // A removal moves the last member into its place
                // (`swap_remove`): the order that gives is kept as it was.
                let mut body = body.clone();
                merge_object(&mut body, patch);
                return compact_map(body);
            }
            (false, false) => len += 1,
            _ => {}
        }
    }
    let mut out = Body::with_capacity(len);
    out.extend(body.iter().map(|(k, v)| (k.clone(), v.clone())));
    merge_object(&mut out, patch);
    compact_patched(&mut out, patch);
    out
}

/// What the patch set is a copy of the patch's (sized as decoded) or a
/// merge into one of the body's objects (grown by it): compacted alone.
fn compact_patched(body: &mut Body, patch: &Body) {
    for key in patch.keys() {
        if let Some(member) = body.get_mut(key) {
            *member = compact(std::mem::take(member));
        }
    }
}

/// Applies `patch` to `body` where it lies — the body [`patched`] makes,
/// though its map may keep more room than it needs — and returns the
/// fields it changed, as [`patch_changed`] does. For a body no one else
/// holds (a stage's update to the offer it ran on): copying every member
/// into a new map was most of a result's work.
pub fn patch_in_place(body: &mut Body, patch: &Body) -> Vec<String> {
    let before: Vec<Option<Value>> = patch.keys().map(|k| body.get(k).cloned()).collect();
    merge_object(body, patch);
    compact_patched(body, patch);
    differing(
        patch
            .keys()
            .zip(&before)
            .map(|(k, old)| (k, old.as_ref(), body.get(k))),
    )
}

/// [`changed_fields`] of `new`, which is `old` with `patch` applied: only
/// the members the patch names can differ, so only those are compared.
pub fn patch_changed(old: &Body, new: &Body, patch: &Body) -> Vec<String> {
    differing(patch.keys().map(|k| (k, old.get(k), new.get(k))))
}

/// The names among `members` (name, old value, new value) whose values
/// differ, sorted: the fields a patch changed.
fn differing<'a>(
    members: impl Iterator<Item = (&'a String, Option<&'a Value>, Option<&'a Value>)>,
) -> Vec<String> {
    let mut fields: Vec<String> = members
        .filter(|(_, old, new)| old != new)
        .map(|(k, _, _)| k.clone())
        .collect();
    fields.sort();
    fields
}

/// Top-level fields whose value differs between `old` and `new` (added,
/// removed or changed), sorted. A new offer (`old = None`) changed every
/// field it has.
pub fn changed_fields(old: Option<&Body>, new: &Body) -> Vec<String> {
    let mut fields: Vec<String> = match old {
        None => new.keys().cloned().collect(),
        Some(old) => {
            let mut fields: Vec<String> = new
                .iter()
                .filter(|(k, v)| old.get(*k) != Some(v))
                .map(|(k, _)| k.clone())
                .collect();
            fields.extend(old.keys().filter(|k| !new.contains_key(*k)).cloned());
            fields
        }
    };
    fields.sort();
    fields
}

/// Rewrites every float with an integral value that fits an `i64` exactly as
/// an integer. Protobuf `Struct` numbers are doubles, so `100` sent as
/// protobuf arrives as `100.0`; without this it would differ from the `100`
/// of a JSON producer and wake stages for nothing.
pub fn normalize(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
                if f.fract() == 0.0 && f.abs() <= EXACT {
                    *n = serde_json::Number::from(f as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        Value::Object(map) => map.values_mut().for_each(normalize),
        _ => {}
    }
}

/// [`normalize`] over a body.
pub fn normalize_body(body: &mut Body) {
    body.values_mut().for_each(normalize);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Body {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn merge_patch_follows_rfc_7396_examples() {
        // The test cases of RFC 7396, appendix A.
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, expected) in cases {
            let mut t = target.clone();
            merge_patch(&mut t, &patch);
            assert_eq!(t, expected, "{target} + {patch}");
        }
    }

    #[test]
    fn changed_fields_lists_added_removed_and_changed() {
        let old = obj(json!({"a": 1, "b": 2, "c": {"x": 1}}));
        let new = obj(json!({"a": 1, "c": {"x": 2}, "d": null}));
        assert_eq!(changed_fields(Some(&old), &new), ["b", "c", "d"]);
        assert_eq!(changed_fields(None, &new), ["a", "c", "d"]);
        assert!(changed_fields(Some(&old), &old).is_empty());
    }

    /// Small JSON values over few keys, so that patches hit the body's
    /// members, remove them (`null`) and merge into its objects.
    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0i64..4).prop_map(Value::from),
            "[ab]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn object() -> impl proptest::strategy::Strategy<Value = Body> {
        use proptest::strategy::Strategy;
        proptest::collection::vec(("[a-e]", value()), 0..6)
            .prop_map(|members| members.into_iter().collect())
    }

    proptest::proptest! {
        /// The one-pass patch gives what cloning, merging and compacting
        /// gave, member order included; the fields it reports changed are
        /// those a full comparison finds; and the result is within the
        /// size and depth bound of the two.
        #[test]
        fn patched_is_clone_merge_compact(body in object(), patch in object()) {
            let mut reference = body.clone();
            merge_object(&mut reference, &patch);
            let got = patched(&body, &patch);
            let order = |b: &Body| b.keys().cloned().collect::<Vec<_>>();
            proptest::prop_assert_eq!(order(&got), order(&reference));
            proptest::prop_assert_eq!(
                serde_json::to_string(&got).unwrap(),
                serde_json::to_string(&reference).unwrap()
            );
            proptest::prop_assert_eq!(
                patch_changed(&body, &got, &patch),
                changed_fields(Some(&body), &got)
            );
            // Patched in place: the same body, member order included, and
            // the same fields changed.
            let mut in_place = body.clone();
            let changed = patch_in_place(&mut in_place, &patch);
            proptest::prop_assert_eq!(order(&in_place), order(&got));
            proptest::prop_assert_eq!(&in_place, &got);
            proptest::prop_assert_eq!(changed, patch_changed(&body, &got, &patch));
            // The bound the driver checks an update's body against.
            use crate::codec::limits::{object_depth, object_size};
            proptest::prop_assert!(object_size(&got) <= object_size(&body) + object_size(&patch));
            proptest::prop_assert!(
                object_depth(&got) <= object_depth(&body).max(object_depth(&patch))
            );
            proptest::prop_assert_eq!(object_size(&got), serde_json::to_string(&got).unwrap().len());
        }
    }

    #[test]
    fn normalize_makes_integral_floats_integers() {
        let mut v = json!({"p": 100.0, "q": 1.5, "r": [2.0, {"s": -3.0}], "t": 1e300});
        normalize(&mut v);
        assert_eq!(
            v,
            json!({"p": 100, "q": 1.5, "r": [2, {"s": -3}], "t": 1e300})
        );
    }

    #[test]
    fn compacting_keeps_every_member_in_its_order() {
        // Grown entry by entry, as decoding and patches build them.
        let mut body = Body::new();
        for k in ["z", "a", "m", "b", "y", "c", "x", "d", "w"] {
            body.insert(
                k.into(),
                json!({"list": [1, {"k": k}, [null, true]], "n": 1.5}),
            );
        }
        let before = serde_json::to_string(&body).unwrap();
        let shared = share(body);
        assert_eq!(serde_json::to_string(&*shared).unwrap(), before);
        let value = json!([{"b": 1, "a": [{"d": 2, "c": 3}]}, "s", 7]);
        let text = value.to_string();
        assert_eq!(compact(value).to_string(), text);
    }
}
