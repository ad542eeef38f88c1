//! The trigger DSL parser.
//!
//! The grammar is small enough for a hand-written recursive descent, which
//! lets every error name the column of the offending token and say what was
//! expected there. Columns are 1-based and counted in chars, as editors show them.

use super::{Leaf, Trigger, CHUNK_DELAY_DEFAULT, CHUNK_DELTA_DEFAULT};
use crate::ctl::{self, ParamName, Scale};
use crate::duration::{self, Duration};

/// Why trigger text could not be read, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {message}")]
pub struct ParseError {
    /// 1-based column of the offending token, counted in chars.
    pub column: usize,
    /// What was expected and what was found.
    pub message: String,
}

/// Longest trigger text. The grammar itself bounds nesting (three levels
/// of `all`/`any`), so the parser's recursion is bounded; this bounds the
/// rest (tokens, leaves, parameters of one task).
pub const MAX_BYTES: usize = 16 * 1024;

const FUNCTIONS: &str =
    "delta, delay, ref_delay, chunk_delta, chunk_delay, chunk_ref_delay, all, any";

/// Parses trigger DSL text such as
/// `all(chunk_delta(dwh.orders/max_dt, day), delay(dwh.users/updated_at, 2h))`.
pub fn parse(src: &str) -> Result<Trigger<ParamName>, ParseError> {
    if src.len() > MAX_BYTES {
        return Err(ParseError {
            column: 1,
            message: format!(
                "trigger too large: {} bytes, over the limit of {MAX_BYTES}",
                src.len()
            ),
        });
    }
    let mut parser = Parser {
        tokens: lex(src)?,
        pos: 0,
    };
    let trigger = parser.trigger(Nesting::Root)?;
    let end = parser.next();
    if end.kind != Kind::End {
        return Err(end.error(format!(
            "expected the end of the trigger, found {}",
            end.found()
        )));
    }
    Ok(trigger)
}

/// What kind of token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A name, parameter, duration, scale or number.
    Word,
    /// `(`.
    Open,
    /// `)`.
    Close,
    /// `,`.
    Comma,
    /// The end of the input.
    End,
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
    column: usize,
}

impl Token<'_> {
    fn found(&self) -> String {
        match self.kind {
            Kind::End => "the end of the input".to_string(),
            _ => format!("`{}`", self.text),
        }
    }

    fn error(&self, message: String) -> ParseError {
        ParseError {
            column: self.column,
            message,
        }
    }
}

/// Word characters cover parameters (`dwh.orders/max_dt`), durations, scales and numbers.
fn is_word_char(c: char) -> bool {
    ctl::is_name_char(c) || c == '/'
}

fn lex(src: &str) -> Result<Vec<Token<'_>>, ParseError> {
    let mut tokens = Vec::new();
    let mut chars = src.char_indices().zip(1..).peekable();
    while let Some(((start, c), column)) = chars.next() {
        let kind = match c {
            '(' => Kind::Open,
            ')' => Kind::Close,
            ',' => Kind::Comma,
            c if c.is_whitespace() => continue,
            c if is_word_char(c) => {
                let mut end = start + c.len_utf8();
                while let Some(&((i, c), _)) = chars.peek() {
                    if !is_word_char(c) {
                        break;
                    }
                    end = i + c.len_utf8();
                    chars.next();
                }
                tokens.push(Token {
                    kind: Kind::Word,
                    text: &src[start..end],
                    column,
                });
                continue;
            }
            other => {
                return Err(ParseError {
                    column,
                    message: format!(
                        "unexpected character `{other}`; expected a trigger such as delta(dwh.orders/max_dt, 1d), a parameter, a duration, a scale, a number, `(`, `)` or `,`"
                    ),
                })
            }
        };
        tokens.push(Token {
            kind,
            text: &src[start..start + 1],
            column,
        });
    }
    tokens.push(Token {
        kind: Kind::End,
        text: "",
        column: src.chars().count() + 1,
    });
    Ok(tokens)
}

/// Where a call sits, for the nesting rule.
#[derive(Debug, Clone, Copy)]
enum Nesting {
    /// The whole trigger.
    Root,
    /// A child of the top-level `all` (true) or `any` (false).
    InTop(bool),
    /// A child of a nested combinator: `all` (true) inside `any`, or the opposite.
    InNested(bool),
}

/// The argument kinds of a leaf function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    /// A parameter `entity/param`.
    Param,
    /// A duration such as `2h`.
    Duration,
    /// A scale such as `day` or `30min`.
    Scale,
}

/// A parsed argument.
enum Value {
    /// From [`Arg::Param`].
    Param(ParamName),
    /// From [`Arg::Duration`].
    Duration(Duration),
    /// From [`Arg::Scale`].
    Scale(Scale),
}

struct Parser<'a> {
    tokens: Vec<Token<'a>>,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        // The token list ends with `End` and `next` never moves past it.
        self.tokens
            .get(self.pos)
            .or(self.tokens.last())
            .copied()
            .unwrap_or(Token {
                kind: Kind::End,
                text: "",
                column: 1,
            })
    }

    fn next(&mut self) -> Token<'a> {
        let token = self.peek();
        // The end token stays put so that lookahead past it is harmless.
        if token.kind != Kind::End {
            self.pos += 1;
        }
        token
    }

    fn trigger(&mut self, nesting: Nesting) -> Result<Trigger<ParamName>, ParseError> {
        let name = self.next();
        if name.kind != Kind::Word {
            return Err(name.error(format!(
                "expected a trigger such as delta(dwh.orders/max_dt, 1d) or all(...), found {}",
                name.found()
            )));
        }
        let combinator = match name.text {
            "all" => Some(true),
            "any" => Some(false),
            "delta" | "delay" | "ref_delay" | "chunk_delta" | "chunk_delay" | "chunk_ref_delay" => {
                None
            }
            other => {
                return Err(name.error(format!(
                    "unknown trigger `{other}`; expected one of {FUNCTIONS}"
                )))
            }
        };
        let open = self.next();
        if open.kind != Kind::Open {
            return Err(open.error(format!(
                "expected `(` after `{}`, found {}",
                name.text,
                open.found()
            )));
        }
        match combinator {
            Some(all) => self.combinator(name, all, nesting),
            None => self.leaf(name),
        }
    }

    fn combinator(
        &mut self,
        name: Token<'a>,
        all: bool,
        nesting: Nesting,
    ) -> Result<Trigger<ParamName>, ParseError> {
        let kind = |all: bool| if all { "all" } else { "any" };
        let inner = match nesting {
            Nesting::Root => Nesting::InTop(all),
            Nesting::InTop(outer) if outer != all => Nesting::InNested(all),
            Nesting::InTop(outer) => {
                return Err(name.error(format!(
                    "`{}` cannot be nested inside `{}`; one level of the opposite kind is allowed (any inside all, all inside any)",
                    name.text,
                    kind(outer)
                )))
            }
            Nesting::InNested(outer) => {
                return Err(name.error(format!(
                    "nesting too deep: `{}` inside `{}` inside `{}`; only one level of the opposite kind is allowed, and its arguments must be delta, delay, ref_delay, chunk_delta, chunk_delay or chunk_ref_delay",
                    name.text,
                    kind(outer),
                    kind(!outer)
                )))
            }
        };
        if self.peek().kind == Kind::Close {
            return Err(self.peek().error(format!(
                "empty `{}()`: expected at least one trigger",
                name.text
            )));
        }
        let mut children = Vec::new();
        loop {
            children.push(self.trigger(inner)?);
            let sep = self.next();
            match sep.kind {
                Kind::Comma => continue,
                Kind::Close => break,
                _ => {
                    return Err(sep.error(format!(
                        "expected `,` or `)` after an argument of `{}`, found {}",
                        name.text,
                        sep.found()
                    )))
                }
            }
        }
        Ok(if all {
            Trigger::All(children.into())
        } else {
            Trigger::Any(children.into())
        })
    }

    fn leaf(&mut self, name: Token<'a>) -> Result<Trigger<ParamName>, ParseError> {
        use Arg::*;
        let (args, default_n): (&[Arg], Option<u32>) = match name.text {
            "delta" | "delay" => (&[Param, Duration], None),
            "ref_delay" => (&[Param, Param, Duration], None),
            "chunk_delta" => (&[Param, Scale], Some(CHUNK_DELTA_DEFAULT)),
            "chunk_delay" => (&[Param, Scale], Some(CHUNK_DELAY_DEFAULT)),
            _ => (&[Param, Param, Scale], Some(CHUNK_DELAY_DEFAULT)),
        };
        let signature = signature(args, default_n.is_some());
        let count = match default_n {
            Some(_) => format!("{} or {}", args.len(), args.len() + 1),
            None => args.len().to_string(),
        };
        let arity = || format!("`{}` takes {count} arguments ({signature})", name.text);
        let mut values = Vec::with_capacity(args.len());
        for (i, &arg) in args.iter().enumerate() {
            if i > 0 {
                let sep = self.next();
                if sep.kind != Kind::Comma {
                    return Err(sep.error(format!(
                        "{}; expected `,`, found {}",
                        arity(),
                        sep.found()
                    )));
                }
            }
            let token = self.next();
            if token.kind != Kind::Word {
                return Err(token.error(format!(
                    "{}; expected {}, found {}",
                    arity(),
                    describe(arg),
                    token.found()
                )));
            }
            values.push(self.value(arg, token)?);
        }
        let mut n = default_n;
        if default_n.is_some() && self.peek().kind == Kind::Comma {
            self.next();
            let token = self.next();
            n = Some(self.count(token)?);
        }
        let close = self.next();
        if close.kind != Kind::Close {
            let found = match close.kind {
                Kind::Comma => self.peek(),
                _ => close,
            };
            return Err(found.error(format!(
                "{}; expected `)`, found {}",
                arity(),
                found.found()
            )));
        }
        let leaf = build(name.text, values, n).ok_or_else(|| ParseError {
            column: name.column,
            message: format!("`{}` takes {}", name.text, "its documented arguments"),
        })?;
        Ok(Trigger::Leaf(leaf))
    }

    fn value(&self, arg: Arg, token: Token<'a>) -> Result<Value, ParseError> {
        let found = if self.peek().kind == Kind::Open {
            format!("a call to `{}`", token.text)
        } else {
            token.found()
        };
        let fail = || token.error(format!("expected {}, found {found}", describe(arg)));
        if self.peek().kind == Kind::Open {
            return Err(fail());
        }
        match arg {
            Arg::Param => token.text.parse().map(Value::Param).map_err(|_| fail()),
            Arg::Duration => duration::parse(token.text)
                .map(Value::Duration)
                .map_err(|_| fail()),
            Arg::Scale => token.text.parse().map(Value::Scale).map_err(|_| fail()),
        }
    }

    fn count(&self, token: Token<'a>) -> Result<u32, ParseError> {
        let digits = token.kind == Kind::Word && token.text.bytes().all(|b| b.is_ascii_digit());
        let n = digits.then(|| token.text.parse::<u32>().ok()).flatten();
        n.ok_or_else(|| {
            token.error(format!(
                "expected a number of chunks (a whole number such as 0, 1 or 2), found {}",
                token.found()
            ))
        })
    }
}

fn describe(arg: Arg) -> &'static str {
    match arg {
        Arg::Param => "a parameter `entity/param` such as dwh.orders/max_dt",
        Arg::Duration => "a duration such as 45s, 30min, 2h or 2d",
        Arg::Scale => "a scale: minute, hour, day, week, month, quarter, year, or a fixed size such as 30min or 4h",
    }
}

fn signature(args: &[Arg], optional_n: bool) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        parts.push(match arg {
            Arg::Param if i == 0 => "parameter",
            Arg::Param => "reference parameter",
            Arg::Duration => "duration",
            Arg::Scale => "scale",
        });
    }
    let mut out = parts.join(", ");
    if optional_n {
        out.push_str("[, n]");
    }
    out
}

/// Assembles a leaf from arguments already checked against its signature
/// (`None` only if the caller's check and this disagree).
fn build(function: &str, values: Vec<Value>, n: Option<u32>) -> Option<Leaf<ParamName>> {
    let mut params = Vec::new();
    let mut d = Duration::ZERO;
    let mut scale = Scale::Day;
    for value in values {
        match value {
            Value::Param(p) => params.push(p),
            Value::Duration(v) => d = v,
            Value::Scale(v) => scale = v,
        }
    }
    let mut params = params.into_iter();
    let p = params.next()?;
    let r = params.next();
    let n = n.unwrap_or_default();
    Some(match (function, r) {
        ("delta", _) => Leaf::Delta { p, d },
        ("delay", _) => Leaf::Delay { p, d },
        ("ref_delay", Some(r)) => Leaf::RefDelay { p, r, d },
        ("chunk_delta", _) => Leaf::ChunkDelta { p, scale, n },
        ("chunk_delay", _) => Leaf::ChunkDelay { p, scale, n },
        ("chunk_ref_delay", Some(r)) => Leaf::ChunkRefDelay { p, r, scale, n },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testgen;
    use super::*;
    use proptest::prelude::*;

    fn err(src: &str) -> (usize, String) {
        let e = parse(src).unwrap_err();
        (e.column, e.message)
    }

    fn assert_err(src: &str, column: usize, needle: &str) {
        let (c, message) = err(src);
        assert_eq!(c, column, "{src}: {message}");
        assert!(message.contains(needle), "{src}: {message}");
    }

    #[test]
    fn parses_the_design_example() {
        let t = parse("all(chunk_delta(dwh.orders/max_dt, day), delay(dwh.users/updated_at, 2h))")
            .unwrap();
        let expected = Trigger::All(
            vec![
                Trigger::Leaf(Leaf::ChunkDelta {
                    p: ParamName::new("dwh.orders", "max_dt"),
                    scale: Scale::Day,
                    n: 1,
                }),
                Trigger::Leaf(Leaf::Delay {
                    p: ParamName::new("dwh.users", "updated_at"),
                    d: Duration::from_secs(7200),
                }),
            ]
            .into(),
        );
        assert_eq!(t, expected);
    }

    #[test]
    fn whitespace_anywhere_between_tokens() {
        let spaced =
            parse(" \tany (\n chunk_ref_delay ( a/x ,b/y,30min , 2 ) ,delta(a/x,45s))\n").unwrap();
        let tight = parse("any(chunk_ref_delay(a/x,b/y,30min,2),delta(a/x,45s))").unwrap();
        assert_eq!(spaced, tight);
        assert!(parse("delta(a /x, 1h)").is_err());
    }

    #[test]
    fn defaults() {
        let n = |src: &str| match parse(src).unwrap() {
            Trigger::Leaf(
                Leaf::ChunkDelta { n, .. }
                | Leaf::ChunkDelay { n, .. }
                | Leaf::ChunkRefDelay { n, .. },
            ) => n,
            other => panic!("{other:?}"),
        };
        assert_eq!(n("chunk_delta(a/x, day)"), 1);
        assert_eq!(n("chunk_delay(a/x, day)"), 0);
        assert_eq!(n("chunk_ref_delay(a/x, b/y, day)"), 0);
        assert_eq!(n("chunk_delta(a/x, day, 0)"), 0);
    }

    #[test]
    fn unknown_function() {
        assert_err(
            "deltaa(a/x, 1h)",
            1,
            "unknown trigger `deltaa`; expected one of delta, delay, ref_delay",
        );
        assert_err(
            "all(delta(a/x, 1h), Delay(a/x, 1h))",
            21,
            "unknown trigger `Delay`",
        );
    }

    #[test]
    fn bad_arguments() {
        assert_err(
            "delay(dwh.users/x, 2x)",
            20,
            "expected a duration such as 45s, 30min, 2h or 2d, found `2x`",
        );
        assert_err(
            "chunk_delta(a/x, days)",
            18,
            "expected a scale: minute, hour",
        );
        assert_err("chunk_delta(a/x, 25h)", 18, "found `25h`");
        assert_err(
            "chunk_delta(a/x, day, -1)",
            23,
            "expected a number of chunks",
        );
        assert_err("chunk_delta(a/x, day, 1h)", 23, "found `1h`");
        assert_err("chunk_delta(a/x, day, 99999999999)", 23, "number of chunks");
        assert_err(
            "delta(orders, 1h)",
            7,
            "expected a parameter `entity/param` such as dwh.orders/max_dt, found `orders`",
        );
        assert_err("delta(a/b/c, 1h)", 7, "found `a/b/c`");
        assert_err("delta(delay(a/x, 1h), 1h)", 7, "found a call to `delay`");
        assert_err("delta(a/x, 1h) !", 16, "unexpected character `!`");
        assert_err("delta(é/x, 1h)", 7, "unexpected character `é`");
    }

    #[test]
    fn columns_count_chars() {
        // `é` is two bytes but one column.
        assert_err("all(delta(a/x, 1h), é)", 21, "unexpected character `é`");
        assert_err("delta(a/x,\u{00a0}2y)", 12, "found `2y`");
    }

    #[test]
    fn arity() {
        assert_err(
            "delta(a/x)",
            10,
            "`delta` takes 2 arguments (parameter, duration); expected `,`, found `)`",
        );
        assert_err(
            "delta(a/x, 1h, 2h)",
            16,
            "`delta` takes 2 arguments (parameter, duration); expected `)`, found `2h`",
        );
        assert_err("ref_delay(a/x, 1h)", 16, "expected a parameter");
        assert_err(
            "chunk_delta(a/x)",
            16,
            "`chunk_delta` takes 2 or 3 arguments (parameter, scale[, n])",
        );
        assert_err("chunk_delta(a/x, day, 1, 2)", 26, "expected `)`, found `2`");
        assert_err(
            "delta(a/x,)",
            11,
            "expected a duration such as 45s, 30min, 2h or 2d, found `)`",
        );
        assert_err("delta()", 7, "expected a parameter");
    }

    #[test]
    fn structure() {
        assert_err("", 1, "expected a trigger such as delta(dwh.orders/max_dt, 1d) or all(...), found the end of the input");
        assert_err(
            "delta",
            6,
            "expected `(` after `delta`, found the end of the input",
        );
        assert_err(
            "delta(a/x, 1h) delay(a/x, 1h)",
            16,
            "expected the end of the trigger, found `delay`",
        );
        assert_err(
            "delta(a/x, 1h))",
            15,
            "expected the end of the trigger, found `)`",
        );
        assert_err("all()", 5, "empty `all()`: expected at least one trigger");
        assert_err("any(delta(a/x, 1h), all ( ))", 27, "empty `all()`");
        assert_err(
            "all(delta(a/x, 1h) delay(a/x, 1h))",
            20,
            "expected `,` or `)` after an argument of `all`, found `delay`",
        );
        assert_err("all(delta(a/x, 1h),", 20, "found the end of the input");
        assert_err("all(a/x)", 5, "unknown trigger `a/x`");
    }

    #[test]
    fn nesting() {
        assert!(parse("any(all(delta(a/x, 1h), delay(a/x, 1h)), chunk_delta(a/x, day))").is_ok());
        assert!(parse("all(any(delta(a/x, 1h), delay(a/x, 1h)), chunk_delta(a/x, day))").is_ok());
        assert_err(
            "all(all(delta(a/x, 1h)))",
            5,
            "`all` cannot be nested inside `all`; one level of the opposite kind is allowed (any inside all, all inside any)",
        );
        assert_err(
            "any(delta(a/x, 1h), any(delay(a/x, 1h)))",
            21,
            "`any` cannot be nested inside `any`",
        );
        assert_err(
            "any(all(any(delta(a/x, 1h))))",
            9,
            "nesting too deep: `any` inside `all` inside `any`",
        );
        assert_err(
            "all(any(delta(a/x, 1h), all(delta(a/x, 1h))))",
            25,
            "nesting too deep: `all` inside `any` inside `all`",
        );
    }

    #[test]
    fn size_is_limited() {
        let leaf = "delta(a/b, 1h), ";
        let many = format!("any({}delta(a/b, 1h))", leaf.repeat(MAX_BYTES / leaf.len()));
        assert_eq!(
            err(&many),
            (
                1,
                format!(
                    "trigger too large: {} bytes, over the limit of {MAX_BYTES}",
                    many.len()
                )
            )
        );
        let fits = format!(
            "any({}delta(a/b, 1h))",
            leaf.repeat(MAX_BYTES / leaf.len() - 2)
        );
        assert!(fits.len() <= MAX_BYTES);
        assert!(parse(&fits).is_ok());
    }

    #[test]
    fn error_display() {
        let e = parse("delay(dwh.users/updated_at, 2x)").unwrap_err();
        assert_eq!(e.to_string(), format!("column 29: {}", e.message));
    }

    proptest! {
        #[test]
        fn display_round_trips(t in testgen::trigger()) {
            let text = t.to_string();
            prop_assert_eq!(parse(&text).unwrap(), t, "{}", text);
        }
    }
}
