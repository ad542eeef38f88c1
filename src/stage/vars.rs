//! The variables an expression reads, converted from JSON for CEL when it
//! first reads one and borrowing the JSON's strings.
//!
//! Binding a variable to a CEL context converts all of it, and converting
//! a CEL `Value` map copies the map twice over (cel's `TryFrom` clones it,
//! then builds another): an offer's body was converted so for every stage
//! asked about every change. Here a variable is converted on its first
//! read, once per [`Scope`](super::expr::Scope) however many expressions
//! read it, and not at all by an expression that never reads it
//! (`state == null` never converts the body).

use std::collections::HashMap;
use std::sync::OnceLock;

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelTimestamp,
    CelUInt,
};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use jiff::Timestamp;

use crate::offer::Body;

/// Where a variable's value comes from.
pub(super) enum Source<'a> {
    /// A JSON value; `None` is `null`.
    Json(Option<&'a serde_json::Value>),
    /// A JSON object (an offer's body).
    Object(&'a Body),
    /// An offer's `meta`: its id, version and last change.
    Meta {
        /// Offer id.
        id: &'a str,
        /// Offer version.
        version: u64,
        /// When the offer last changed.
        updated_at: Timestamp,
    },
    /// A timestamp (`now`).
    Time(Timestamp),
}

/// One variable: its name, where it comes from, and its CEL form once read.
pub(super) struct Var<'a> {
    name: &'a str,
    source: Source<'a>,
    val: OnceLock<Box<dyn Val + 'a>>,
}

impl<'a> Var<'a> {
    /// Variable `name`, read from `source` when an expression reads it.
    pub(super) fn new(name: &'a str, source: Source<'a>) -> Var<'a> {
        Var {
            name,
            source,
            val: OnceLock::new(),
        }
    }

    /// Whether an expression has read it (and it was converted).
    #[cfg(test)]
    pub(super) fn is_converted(&self) -> bool {
        self.val.get().is_some()
    }

    /// Its name.
    #[cfg(test)]
    pub(super) fn name(&self) -> &str {
        self.name
    }

    /// The CEL form, converted on the first call.
    fn get(&self) -> &(dyn Val + 'a) {
        self.val
            .get_or_init(|| match &self.source {
                Source::Json(Some(value)) => json(value),
                Source::Json(None) => Box::new(CelNull),
                Source::Object(map) => object(map),
                Source::Meta {
                    id,
                    version,
                    updated_at,
                } => {
                    let mut meta: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::new();
                    meta.insert("id".into(), Box::new(CelString::from(*id)));
                    meta.insert("version".into(), Box::new(CelUInt::from(*version)));
                    meta.insert("updated_at".into(), time(*updated_at));
                    Box::new(CelMap::from(meta))
                }
                Source::Time(t) => time(*t),
            })
            .as_ref()
    }
}

/// The variables of one evaluation: those shared by the evaluations of a
/// scope (an offer version's `offer`, `meta`, `now`) and its own (the
/// stage's `state`); kept apart because they live for different times.
pub(super) struct Vars<'s, 'a, 'b> {
    /// Shared variables.
    pub(super) shared: &'s [Var<'a>],
    /// This evaluation's own variables.
    pub(super) own: &'s [Var<'b>],
}

impl VariableResolver for Vars<'_, '_, '_> {
    fn resolve<'r>(&'r self, name: &str) -> Option<CowVal<'r, 'r>> {
        if let Some(var) = self.own.iter().find(|v| v.name == name) {
            return Some(CowVal::Borrowed(var.get()));
        }
        let var = self.shared.iter().find(|v| v.name == name)?;
        Some(CowVal::Borrowed(var.get()))
    }
}

/// JSON to CEL: integers become `int` (`uint` only beyond `i64`), other
/// numbers `double`, so `offer.price % 2 == 0` works as users expect.
fn json(value: &serde_json::Value) -> Box<dyn Val + '_> {
    use serde_json::Value as J;
    match value {
        J::Null => Box::new(CelNull),
        J::Bool(b) => Box::new(CelBool::from(*b)),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        J::String(s) => Box::new(CelString::from(s.as_str())),
        J::Array(items) => Box::new(CelList::from(items.iter().map(json).collect::<Vec<_>>())),
        J::Object(map) => object(map),
    }
}

/// A JSON object to a CEL map with string keys.
fn object(map: &Body) -> Box<dyn Val + '_> {
    let map: HashMap<CelMapKey<'_>, Box<dyn Val + '_>> = map
        .iter()
        .map(|(k, v)| (CelMapKey::from(k.as_str()), json(v)))
        .collect();
    Box::new(CelMap::from(map))
}

/// A timestamp to a CEL timestamp (UTC).
fn time(t: Timestamp) -> Box<dyn Val + 'static> {
    Box::new(CelTimestamp::from(super::expr::chrono_time(t)))
}
