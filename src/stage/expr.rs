//! Stage expressions: CEL (`when`, `timer`, a rescan's filter), compiled once
//! at load and evaluated against one offer version.
//!
//! An expression sees four variables: `offer` (the body), `meta` (`id`,
//! `version`, `updated_at`), `state` (the stage's state, `null` when none)
//! and `now`. Timestamps are CEL timestamps: `meta.updated_at` and `now`
//! directly, body strings through `timestamp(offer.published_at)`.
//!
//! Other expressions of the configuration (process `when`, `on`, `schedule`)
//! compile through the same path with their own variables: [`Expr::compile_for`].

use std::fmt;
use std::sync::{Arc, OnceLock};

use cel::common::ast::{EntryExpr, Expr as Node, IdedExpr, SourceInfo};
use cel::{Context, Env, Program, Value};
use jiff::Timestamp;

use super::vars::{Source, Var, Vars};
use crate::offer::Body;

/// The variables a stage expression may use.
pub const VARIABLES: [&str; 4] = ["offer", "meta", "state", "now"];

/// Longest expression text. The CEL parser and evaluator recurse once per
/// level of the expression tree, so an expression's size is bounded before
/// it is parsed: in configuration (exit 2) and in commands (rejected) alike.
pub const MAX_BYTES: usize = 4096;

/// Deepest nesting of brackets (`(`, `[`, `{`, calls included).
pub const MAX_NESTING: usize = 32;

/// Most operators (`+`, `&&`, `.`, `[`, `!`, `?`, `in` …): bounds the depth
/// of the tree that chains of them build (`1+1+…`, `a.b.c…`).
pub const MAX_OPERATORS: usize = 128;

/// Stack of the thread an expression is compiled on. Compiling only
/// happens at load and for rescan commands, and with the limits above the
/// parse needs a few MiB in a debug build (far less in release): a thread
/// of its own keeps that off the caller's stack whatever its size.
const COMPILE_STACK: usize = 64 * 1024 * 1024;

/// Why an expression could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A syntax error, with its 1-based column.
    #[error("column {column}: {message}")]
    Syntax {
        /// 1-based column of the error.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The expression uses a variable that does not exist.
    #[error("column {column}: unknown variable `{name}`; expressions here see {}", allowed.join(", "))]
    UnknownVariable {
        /// The variable.
        name: String,
        /// 1-based column (in characters) of its first use.
        column: usize,
        /// The variables the expression may use.
        allowed: &'static [&'static str],
    },
    /// The expression is over one of the limits ([`MAX_BYTES`],
    /// [`MAX_NESTING`], [`MAX_OPERATORS`]); it was not parsed.
    #[error("expression too large: {got} {what}, over the limit of {limit}")]
    TooLarge {
        /// What was counted (`bytes`, `levels of brackets`, `operators`).
        what: &'static str,
        /// How many.
        got: usize,
        /// The limit.
        limit: usize,
    },
    /// Evaluation failed (a missing field, a type mismatch …).
    #[error("{0}")]
    Eval(String),
    /// The result has the wrong type.
    #[error("expected {expected}, got {got}")]
    Type {
        /// What the expression must give.
        expected: &'static str,
        /// What it gave.
        got: String,
    },
}

impl Error {
    /// Expressions are fixed by the configuration: retrying never helps.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// The shared standard environment (building one costs ~15 µs).
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib()))
}

/// A compiled CEL expression.
#[derive(Clone)]
pub struct Expr {
    text: String,
    program: Arc<Program>,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Expr").field(&self.text).finish()
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Expr {
    /// Compiles a stage expression (over [`VARIABLES`]), refusing syntax
    /// errors and unknown variables.
    pub fn compile(text: &str) -> Result<Expr, Error> {
        Expr::compile_for(text, &VARIABLES)
    }

    /// Compiles `text` for a context that binds `variables`, refusing
    /// expressions over the size limits, syntax errors and any other variable.
    pub fn compile_for(text: &str, variables: &'static [&'static str]) -> Result<Expr, Error> {
        check_size(text)?;
        let program = on_compile_stack(|| {
            env().compile(text).map_err(|e| {
                let first = e.errors.first();
                Error::Syntax {
                    column: first.map_or(1, |p| usize::try_from(p.pos.1).unwrap_or(1).max(1)),
                    message: first.map_or_else(|| e.to_string(), |p| p.msg.clone()),
                }
            })
        })?;
        let mut first: Option<(&str, u32)> = None;
        unknown_variables(
            program.expression(),
            program.source_info(),
            variables,
            &mut Vec::new(),
            &mut first,
        );
        if let Some((name, offset)) = first {
            let before = usize::try_from(offset)
                .ok()
                .and_then(|offset| text.get(..offset));
            return Err(Error::UnknownVariable {
                name: name.to_string(),
                column: before.map_or(1, |before| before.chars().count() + 1),
                allowed: variables,
            });
        }
        Ok(Expr {
            text: text.to_string(),
            program: Arc::new(program),
        })
    }

    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Evaluates a predicate.
    pub fn eval_bool(
        &self,
        scope: &Scope<'_>,
        state: Option<&serde_json::Value>,
    ) -> Result<bool, Error> {
        match self.eval(scope, state)? {
            Value::Bool(b) => Ok(b),
            other => Err(Error::Type {
                expected: "a bool",
                got: type_name(&other),
            }),
        }
    }

    /// Evaluates a wake-up time: a timestamp (or an RFC 3339 string), or
    /// `null` for none.
    pub fn eval_time(
        &self,
        scope: &Scope<'_>,
        state: Option<&serde_json::Value>,
    ) -> Result<Option<Timestamp>, Error> {
        match self.eval(scope, state)? {
            Value::Null => Ok(None),
            Value::Timestamp(t) => Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
                .map(Some)
                .map_err(|e| Error::Eval(e.to_string())),
            Value::String(s) => s.parse().map(Some).map_err(|e: jiff::Error| Error::Type {
                expected: "a timestamp",
                got: format!("string `{s}` ({e})"),
            }),
            other => Err(Error::Type {
                expected: "a timestamp or null",
                got: type_name(&other),
            }),
        }
    }

    fn eval(&self, scope: &Scope<'_>, state: Option<&serde_json::Value>) -> Result<Value, Error> {
        let own = [Var::new("state", Source::Json(state))];
        self.run(&Vars {
            shared: &scope.vars,
            own: &own,
        })
    }

    /// Runs the program over `vars`, which convert what it reads as it does.
    fn run(&self, vars: &Vars<'_, '_, '_>) -> Result<Value, Error> {
        let mut ctx = Context::with_env(Arc::clone(env()));
        ctx.set_variable_resolver(vars);
        self.program
            .execute(&ctx)
            .map_err(|e| Error::Eval(e.to_string()))
    }
}

/// Finds the identifier written first among those that are neither in
/// `allowed` nor bound by an enclosing macro (`exists(x, …)` binds `x`), with
/// its byte offset in the source.
fn unknown_variables<'e>(
    node: &'e IdedExpr,
    source: &SourceInfo,
    allowed: &[&str],
    bound: &mut Vec<&'e str>,
    first: &mut Option<(&'e str, u32)>,
) {
    let mut visit = |node: &'e IdedExpr, bound: &mut Vec<&'e str>| {
        unknown_variables(node, source, allowed, bound, first);
    };
    match &node.expr {
        // `@`-names are the parser's own accumulators.
        Node::Ident(name)
            if !name.starts_with('@')
                && !allowed.contains(&name.as_str())
                && !bound.contains(&name.as_str()) =>
        {
            let offset = source.offset_for(node.id).map_or(0, |(start, _)| start);
            if first.is_none_or(|(_, seen)| offset < seen) {
                *first = Some((name, offset));
            }
        }
        Node::Ident(_) | Node::Literal(_) | Node::Unspecified => {}
        Node::Select(select) => visit(&select.operand, bound),
        Node::Call(call) => {
            if let Some(target) = &call.target {
                visit(target, bound);
            }
            call.args.iter().for_each(|arg| visit(arg, bound));
        }
        Node::List(list) => list.elements.iter().for_each(|e| visit(e, bound)),
        Node::Map(map) => map.entries.iter().for_each(|e| match &e.expr {
            EntryExpr::StructField(field) => visit(&field.value, bound),
            EntryExpr::MapEntry(entry) => {
                visit(&entry.key, bound);
                visit(&entry.value, bound);
            }
        }),
        Node::Struct(object) => object.entries.iter().for_each(|e| match &e.expr {
            EntryExpr::StructField(field) => visit(&field.value, bound),
            EntryExpr::MapEntry(entry) => {
                visit(&entry.key, bound);
                visit(&entry.value, bound);
            }
        }),
        Node::Comprehension(c) => {
            visit(&c.iter_range, bound);
            visit(&c.accu_init, bound);
            let outer = bound.len();
            bound.push(&c.iter_var);
            bound.extend(c.iter_var2.as_deref());
            bound.push(&c.accu_var);
            visit(&c.loop_cond, bound);
            visit(&c.loop_step, bound);
            visit(&c.result, bound);
            bound.truncate(outer);
        }
    }
}

impl Expr {
    /// Evaluates over named JSON variables (and `now`): the form process
    /// expressions use (`when` over `key`, `params`, `last`, `context`;
    /// `on` over `record`, `headers`).
    pub fn eval_with(
        &self,
        vars: &[(&str, &serde_json::Value)],
        now: Timestamp,
    ) -> Result<Value, Error> {
        let shared: Vec<Var<'_>> = vars
            .iter()
            .map(|&(name, value)| Var::new(name, Source::Json(Some(value))))
            .collect();
        let own = [Var::new("now", Source::Time(now))];
        self.run(&Vars {
            shared: &shared,
            own: &own,
        })
    }

    /// [`Expr::eval_with`] giving a bool.
    pub fn eval_bool_with(
        &self,
        vars: &[(&str, &serde_json::Value)],
        now: Timestamp,
    ) -> Result<bool, Error> {
        match self.eval_with(vars, now)? {
            Value::Bool(b) => Ok(b),
            other => Err(Error::Type {
                expected: "a bool",
                got: type_name(&other),
            }),
        }
    }

    /// [`Expr::eval_with`] giving a non-empty string (a business key);
    /// integers are written in decimal.
    pub fn eval_string_with(
        &self,
        vars: &[(&str, &serde_json::Value)],
        now: Timestamp,
    ) -> Result<String, Error> {
        let text = match self.eval_with(vars, now)? {
            Value::String(s) => s.to_string(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            other => {
                return Err(Error::Type {
                    expected: "a string",
                    got: type_name(&other),
                })
            }
        };
        if text.is_empty() {
            return Err(Error::Type {
                expected: "a non-empty string",
                got: "an empty string".to_string(),
            });
        }
        Ok(text)
    }

    /// [`Expr::eval_with`] giving a map with string keys, as a JSON object.
    pub fn eval_object_with(
        &self,
        vars: &[(&str, &serde_json::Value)],
        now: Timestamp,
    ) -> Result<Body, Error> {
        match from_cel(self.eval_with(vars, now)?)? {
            serde_json::Value::Object(map) => Ok(map),
            other => Err(Error::Type {
                expected: "a map",
                got: format!("{other}"),
            }),
        }
    }
}

/// CEL to JSON, for values an expression computes (parameters): maps need
/// string keys; timestamps become RFC 3339 strings, durations seconds.
fn from_cel(value: Value) -> Result<serde_json::Value, Error> {
    use serde_json::Value as J;
    Ok(match value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(b),
        Value::Int(i) => J::from(i),
        Value::UInt(u) => J::from(u),
        Value::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
        Value::String(s) => J::String(s.to_string()),
        Value::List(items) => J::Array(
            items
                .iter()
                .cloned()
                .map(from_cel)
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(map) => {
            let mut out = serde_json::Map::new();
            let mut entries: Vec<_> = map.map.iter().collect();
            entries.sort_by_key(|(k, _)| format!("{k:?}"));
            for (k, v) in entries {
                let cel::objects::Key::String(k) = k else {
                    return Err(Error::Type {
                        expected: "a map with string keys",
                        got: format!("key {k:?}"),
                    });
                };
                out.insert(k.to_string(), from_cel(v.clone())?);
            }
            J::Object(out)
        }
        Value::Timestamp(t) => J::String(t.to_rfc3339()),
        Value::Duration(d) => J::from(d.num_seconds()),
        other => {
            return Err(Error::Type {
                expected: "JSON data",
                got: type_name(&other),
            })
        }
    })
}

/// Refuses `text` over [`MAX_BYTES`], [`MAX_NESTING`] or [`MAX_OPERATORS`],
/// counted by a flat scan (strings and comments skipped), before any
/// recursive parser sees it.
pub fn check_size(text: &str) -> Result<(), Error> {
    let too_large = |what, got, limit| Err(Error::TooLarge { what, got, limit });
    if text.len() > MAX_BYTES {
        return too_large("bytes", text.len(), MAX_BYTES);
    }
    let b = text.as_bytes();
    let (mut depth, mut deepest, mut operators) = (0usize, 0usize, 0usize);
    let at = |i: usize| b.get(i).copied().unwrap_or_default();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let next = b.get(i + 1).copied();
        i += 1;
        match c {
            b'\'' | b'"' => i = skip_string(b, i - 1),
            b'/' if next == Some(b'/') => {
                while i < b.len() && at(i) != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
                // An index or a call on a target is also a link of a chain.
                operators += usize::from(c == b'[');
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'=' | b'!' | b'<' | b'>' | b'&' | b'|' => {
                operators += 1;
                // Two-character operators (`==`, `!=`, `<=`, `>=`, `&&`, `||`) count once.
                let pair = matches!(
                    (c, next),
                    (b'=' | b'!' | b'<' | b'>', Some(b'='))
                        | (b'&', Some(b'&'))
                        | (b'|', Some(b'|'))
                );
                i += usize::from(pair);
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'?' | b'.' => operators += 1,
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                let start = i - 1;
                while i < b.len() && (at(i).is_ascii_alphanumeric() || at(i) == b'_') {
                    i += 1;
                }
                if b.get(start..i) == Some(&b"in"[..]) {
                    operators += 1;
                } else if c.is_ascii_digit() && b.get(i) == Some(&b'.') {
                    // The point of a number (`1.5`) is not member access.
                    i += 1;
                }
            }
            _ => {}
        }
    }
    if deepest > MAX_NESTING {
        return too_large("levels of brackets", deepest, MAX_NESTING);
    }
    if operators > MAX_OPERATORS {
        return too_large("operators", operators, MAX_OPERATORS);
    }
    Ok(())
}

/// The index after the string literal whose opening quote is at `start`
/// (or the end of `b` when it is not closed): `'…'`, `"…"`, their
/// triple-quoted forms, and raw strings (`r'…'`: no escapes).
fn skip_string(b: &[u8], start: usize) -> usize {
    let at = |i: usize| b.get(i).copied().unwrap_or_default();
    let quote = at(start);
    // A raw string is prefixed with r or R (possibly next to b or B).
    let prefix = b.get(..start).unwrap_or_default();
    let letters = prefix
        .iter()
        .rev()
        .take_while(|c| matches!(c, b'r' | b'R' | b'b' | b'B'))
        .count()
        .min(2);
    let before = prefix.len() - letters;
    let standalone =
        before == 0 || !(at(before - 1).is_ascii_alphanumeric() || at(before - 1) == b'_');
    let raw = standalone
        && prefix
            .get(before..)
            .unwrap_or_default()
            .iter()
            .any(|c| matches!(c, b'r' | b'R'));
    let triple = b.get(start..start + 3) == Some(&[quote, quote, quote][..]);
    let mut i = start + if triple { 3 } else { 1 };
    while i < b.len() {
        if at(i) == b'\\' && !raw {
            i += 2;
            continue;
        }
        if at(i) == quote {
            if !triple {
                return i + 1;
            }
            if b.get(i..i + 3) == Some(&[quote, quote, quote][..]) {
                return i + 3;
            }
        }
        i += 1;
    }
    b.len()
}

/// Runs `compile` on a thread with [`COMPILE_STACK`] (see there).
fn on_compile_stack<T: Send>(
    compile: impl FnOnce() -> Result<T, Error> + Send,
) -> Result<T, Error> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-compile".into())
            .stack_size(COMPILE_STACK)
            .spawn_scoped(scope, compile)
            .map_err(|e| Error::Eval(format!("cannot start a thread to compile on: {e}")))?
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// One offer version as expressions see it: its variables are converted
/// for CEL when an expression first reads them, then shared by every
/// expression evaluated on it ([`super::vars`]).
pub struct Scope<'a> {
    vars: [Var<'a>; 3],
}

impl<'a> Scope<'a> {
    /// The scope of offer `id` at `version` with `body`, evaluated at `now`.
    pub fn new(
        id: &'a str,
        version: u64,
        updated_at: Timestamp,
        body: &'a Body,
        now: Timestamp,
    ) -> Scope<'a> {
        Scope {
            vars: [
                Var::new("offer", Source::Object(body)),
                Var::new(
                    "meta",
                    Source::Meta {
                        id,
                        version,
                        updated_at,
                    },
                ),
                Var::new("now", Source::Time(now)),
            ],
        }
    }
}

#[cfg(test)]
impl Scope<'_> {
    /// Whether variable `name` was read (and converted) by an expression.
    fn converted(&self, name: &str) -> bool {
        self.vars
            .iter()
            .any(|v| v.name() == name && v.is_converted())
    }
}

/// `t` as chrono's UTC time, which CEL timestamps are made of.
pub(super) fn chrono_time(t: Timestamp) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond() as u32)
        .unwrap_or_default()
        .fixed_offset()
}

fn type_name(v: &Value) -> String {
    format!("{:?}", v.type_of()).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn body(value: serde_json::Value) -> Body {
        value.as_object().unwrap().clone()
    }

    fn scope(body: &Body) -> Scope<'_> {
        Scope::new(
            "o1",
            3,
            ts("2024-01-02T00:00:00Z"),
            body,
            ts("2024-06-01T00:00:00Z"),
        )
    }

    #[test]
    fn predicates_see_offer_meta_state_and_now() {
        let b = body(json!({"status": "active", "price": 100}));
        let s = scope(&b);
        let e = Expr::compile(
            "offer.status == 'active' && meta.id == 'o1' && meta.version == 3u \
             && (state == null || state.model < 3) && now > meta.updated_at",
        )
        .unwrap();
        assert_eq!(e.eval_bool(&s, None), Ok(true));
        assert_eq!(e.eval_bool(&s, Some(&json!({"model": 2}))), Ok(true));
        assert_eq!(e.eval_bool(&s, Some(&json!({"model": 3}))), Ok(false));
    }

    #[test]
    fn variables_are_converted_once_read() {
        let b = body(json!({"price": 1}));
        let s = scope(&b);
        let state_only = Expr::compile("state == null").unwrap();
        assert_eq!(state_only.eval_bool(&s, None), Ok(true));
        assert!(!s.converted("offer") && !s.converted("meta") && !s.converted("now"));
        let price = Expr::compile("offer.price == 1 && now > meta.updated_at").unwrap();
        assert_eq!(price.eval_bool(&s, None), Ok(true));
        assert!(s.converted("offer") && s.converted("meta") && s.converted("now"));
        // Read again from the converted form, by another expression too.
        assert_eq!(price.eval_bool(&s, Some(&json!({"k": 1}))), Ok(true));
        let other = Expr::compile("offer.price + 1").unwrap();
        assert!(other.eval_time(&s, None).is_err());
    }

    #[test]
    fn timers_give_timestamps_or_null() {
        let b = body(json!({"published_at": "2024-01-01T00:00:00Z"}));
        let s = scope(&b);
        let e = Expr::compile("timestamp(offer.published_at) + duration('4320h')").unwrap();
        assert_eq!(e.eval_time(&s, None), Ok(Some(ts("2024-06-29T00:00:00Z"))));
        let none = Expr::compile("null").unwrap();
        assert_eq!(none.eval_time(&s, None), Ok(None));
        let text = Expr::compile("offer.published_at").unwrap();
        assert_eq!(
            text.eval_time(&s, None),
            Ok(Some(ts("2024-01-01T00:00:00Z")))
        );
        let bad = Expr::compile("1").unwrap();
        assert!(matches!(bad.eval_time(&s, None), Err(Error::Type { .. })));
    }

    #[test]
    fn json_integers_are_cel_ints() {
        let b = body(json!({"k": 4, "f": 1.5, "list": [1, 2], "big": u64::MAX}));
        let s = scope(&b);
        for text in [
            "offer.k % 2 == 0",
            "offer.k == 4",
            "offer.f > 1.0",
            "size(offer.list) == 2",
            "offer.list[1] == 2",
            "offer.big == 18446744073709551615u",
        ] {
            assert_eq!(
                Expr::compile(text).unwrap().eval_bool(&s, None),
                Ok(true),
                "{text}"
            );
        }
    }

    #[test]
    fn evaluation_errors_are_reported_not_panics() {
        let b = body(json!({"status": "active"}));
        let s = scope(&b);
        let missing = Expr::compile("offer.price > 10").unwrap();
        assert!(matches!(missing.eval_bool(&s, None), Err(Error::Eval(_))));
        let not_bool = Expr::compile("offer.status").unwrap();
        assert!(matches!(
            not_bool.eval_bool(&s, None),
            Err(Error::Type { .. })
        ));
    }

    #[test]
    fn compile_errors_name_the_column_and_unknown_variables() {
        match Expr::compile("offer.price >") {
            Err(Error::Syntax { column, .. }) => assert_eq!(column, 14),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Expr::compile("offr.price > 1").unwrap_err(),
            Error::UnknownVariable {
                name: "offr".into(),
                column: 1,
                allowed: &VARIABLES,
            }
        );
    }

    #[test]
    fn unknown_variables_name_their_first_column() {
        let column = |text: &str| match Expr::compile(text) {
            Err(Error::UnknownVariable { column, .. }) => column,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(column("'x' + x"), 7);
        assert_eq!(column("offer.x + x"), 11);
        assert_eq!(column("\"a\\\"x\" + x"), 10);
        assert_eq!(column("'é' + x"), 7, "characters, not bytes");
        assert_eq!(column("x.a + offer.b + x.c"), 1);
        assert_eq!(
            column("[y, 1].exists(v, v == x)"),
            2,
            "the first one written"
        );
    }

    #[test]
    fn macro_variables_are_bound_inside_their_macro_only() {
        let b = body(json!({"items": [1, 5], "tags": {"a": 1}}));
        let s = scope(&b);
        let e = Expr::compile("offer.items.exists(i, i > 4) && offer.items.all(i, i > 0)").unwrap();
        assert_eq!(e.eval_bool(&s, None), Ok(true));
        let e = Expr::compile("offer.items.map(i, i * 2).filter(j, j > 2).size() == 1").unwrap();
        assert_eq!(e.eval_bool(&s, None), Ok(true));
        match Expr::compile("offer.items.exists(i, i > 0) && i > 0") {
            Err(Error::UnknownVariable { name, column, .. }) => {
                assert_eq!((name.as_str(), column), ("i", 33));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn compile_for_checks_the_given_variables() {
        const ON: &[&str] = &["record", "headers", "now"];
        assert!(Expr::compile_for("record.amount > 0 && headers.kind == 'x'", ON).is_ok());
        let e = Expr::compile_for("offer.amount > 0", ON).unwrap_err();
        assert_eq!(
            e.to_string(),
            "column 1: unknown variable `offer`; expressions here see record, headers, now"
        );
        assert!(matches!(
            Expr::compile_for("record.", ON),
            Err(Error::Syntax { .. })
        ));
    }

    #[test]
    fn oversized_expressions_are_refused_before_parsing() {
        let chain = |op: &str, n: usize| format!("1{}", op.repeat(n));
        let too_large = |text: &str| match Expr::compile(text) {
            Err(Error::TooLarge { what, got, limit }) => (what, got, limit),
            other => panic!("{other:?}"),
        };
        // The issue's command: 3,000 terms stopped every instance.
        assert_eq!(too_large(&chain("+1", 2999)).0, "bytes");
        assert_eq!(too_large(&chain("+1", 1000)), ("operators", 1000, 128));
        assert_eq!(
            too_large(&format!("offer{}", ".a".repeat(200))),
            ("operators", 200, 128)
        );
        assert_eq!(
            too_large(&format!("offer{}", "['a']".repeat(200))),
            ("operators", 200, 128)
        );
        assert_eq!(
            too_large(&format!("{}1{}", "(".repeat(40), ")".repeat(40))),
            ("levels of brackets", 40, 32)
        );
        assert_eq!(
            too_large(&format!("{}1{}", "[".repeat(33), "]".repeat(33))).0,
            "levels of brackets"
        );
        assert_eq!(too_large(&"!".repeat(200)).0, "operators");
        assert_eq!(
            Expr::compile(&chain("+1", 1000)).unwrap_err().to_string(),
            "expression too large: 1000 operators, over the limit of 128"
        );
    }

    #[test]
    fn operators_are_counted_as_written() {
        let count = |text: &str| {
            check_size(text).unwrap();
            let over = format!("{text}\n{}", " + 1".repeat(MAX_OPERATORS + 1));
            match check_size(&over) {
                Err(Error::TooLarge { got, .. }) => got - MAX_OPERATORS - 1,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(count("a == b && c != d || e <= f && g >= h"), 7);
        assert_eq!(count("!!a"), 2);
        assert_eq!(count("offer.price * 1.5 > 10.25"), 3);
        assert_eq!(count(r#"'a+b.c' + "d==e" + '''f'g''' // h+i"#), 2);
        assert_eq!(count(r"r'\' + 'x\'+' + b'y'"), 2);
        assert_eq!(count("x in [1, 2] ? y[0] : z"), 4);
        assert_eq!(count("input"), 0);
    }

    #[test]
    fn the_largest_expressions_compile_and_evaluate() {
        let b = body(json!({"a": 1}));
        let s = scope(&b);
        let longest = format!("1{} == 1", "+1".repeat(MAX_OPERATORS - 1));
        let deepest = format!(
            "{}1{} == 1",
            "(".repeat(MAX_NESTING),
            ")".repeat(MAX_NESTING)
        );
        for (text, expected) in [(longest, false), (deepest, true)] {
            let e = Expr::compile(&text).unwrap();
            // Evaluated on a stack like the runtime thread's: in a debug
            // build a chain of 128 operators needs more than a test thread's
            // 2 MiB.
            let s = &s;
            let result = std::thread::scope(|scope| {
                std::thread::Builder::new()
                    .stack_size(crate::runtime::supervisor::RUNTIME_STACK)
                    .spawn_scoped(scope, || e.eval_bool(s, None))
                    .unwrap()
                    .join()
                    .unwrap()
            });
            assert_eq!(result, Ok(expected), "{text}");
        }
    }
}
