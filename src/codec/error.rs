//! Why a record could not be decoded. The text goes into the dead-letter
//! record's headers, so it must tell a producer what to fix.

use crate::ctl;

/// A record that is not a valid encoding of the expected message, or whose
/// content cannot become a core value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The value is not a protobuf encoding of the expected message.
    #[error("protobuf: {0}")]
    Protobuf(String),
    /// The value is not proto3 JSON of the expected message.
    #[error("json: {0}")]
    Json(String),
    /// A required field is absent or empty.
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    /// A parameter name is not `entity/param` with allowed characters.
    #[error("field `{field}`: {source}")]
    ParamName {
        /// The field holding the name.
        field: &'static str,
        /// What is wrong with it.
        source: ctl::Error,
    },
    /// A run result's status is neither SUCCEEDED nor FAILED.
    #[error("status must be SUCCEEDED or FAILED, got {0}")]
    Status(String),
    /// A field holds a value out of range or unknown to this version.
    #[error("field `{field}`: {reason}")]
    InvalidField {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Fields of which exactly one must be set have none or several set.
    #[error("exactly one of {0} must be set")]
    ExactlyOne(&'static str),
    /// Fields that exclude each other are set together.
    #[error("at most one of {0} may be set")]
    AtMostOne(&'static str),
    /// The whole record is larger than Reactor accepts.
    #[error("the record (key and value) is {size} bytes, over the input limit of {limit}")]
    RecordTooLarge {
        /// Key and value bytes.
        size: usize,
        /// [`super::limits::MAX_INPUT_BYTES`].
        limit: usize,
    },
    /// A field is larger than Reactor accepts (bytes of text, or of compact
    /// JSON for a JSON value).
    #[error("field `{field}`: {size} bytes, over the limit of {limit}")]
    FieldTooLarge {
        /// The field.
        field: &'static str,
        /// Its size.
        size: usize,
        /// The limit (see [`super::limits`]).
        limit: usize,
    },
    /// A JSON field nests arrays and objects deeper than Reactor accepts.
    #[error("field `{field}`: nested {depth} levels deep, over the limit of {limit}")]
    TooDeep {
        /// The field.
        field: &'static str,
        /// Its depth.
        depth: usize,
        /// [`super::limits::MAX_JSON_DEPTH`].
        limit: usize,
    },
    /// A value starting with byte 0 (Schema Registry framing) is too short
    /// or its message indexes are malformed.
    #[error("schema registry framing: {0}")]
    Framing(&'static str),
    /// A changelog key is not `store/key` with a known store.
    #[error("changelog key `{key}`: {reason}")]
    ChangelogKey {
        /// The key, lossily decoded as UTF-8.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl DecodeError {
    /// Always false: the same bytes fail the same way every time, so the
    /// record is poison and goes to the dead-letter topic.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// `value`, or [`DecodeError::MissingField`] when absent.
pub(super) fn required<T>(field: &'static str, value: Option<T>) -> Result<T, DecodeError> {
    value.ok_or(DecodeError::MissingField(field))
}

/// `value`, or [`DecodeError::MissingField`] when empty: proto3 cannot tell
/// an empty string from an absent one.
pub(super) fn non_empty(field: &'static str, value: String) -> Result<String, DecodeError> {
    if value.is_empty() {
        Err(DecodeError::MissingField(field))
    } else {
        Ok(value)
    }
}

/// `text` parsed as `entity/param`.
pub(super) fn param_name(field: &'static str, text: &str) -> Result<ctl::ParamName, DecodeError> {
    text.parse()
        .map_err(|source| DecodeError::ParamName { field, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_the_problem() {
        assert_eq!(
            DecodeError::AtMostOne("`timer` and `clear_timer`").to_string(),
            "at most one of `timer` and `clear_timer` may be set"
        );
        assert_eq!(
            DecodeError::MissingField("value").to_string(),
            "missing field `value`"
        );
        let err = param_name("param", "nope").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("field `param`: invalid parameter `nope`"));
        assert!(!err.is_retryable());
        assert_eq!(
            non_empty("task", String::new()),
            Err(DecodeError::MissingField("task"))
        );
        assert_eq!(required("at", Some(1)), Ok(1));
    }
}
