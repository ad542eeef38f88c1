//! The rules for names: ids of tasks, stages, jobs and processes, and Kafka
//! topic names, with the checks every section that names something shares.

use toml::Spanned;

use super::{Error, Section, Source, Topics};

/// Whether `id` is a usable task id or stage, job or process name: non-empty
/// ASCII letters, digits and `_ . : -`. Run ids are `TASK#SEQ`,
/// `STAGE/OFFER#SEQ` and `PROCESS/KEY#N`, so neither `/` nor `#` may appear
/// in one.
pub(super) fn is_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// Whether Kafka accepts `name` as a topic name.
pub(super) fn is_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The section of a `kind` (`stage`, `job`, `process`) named by `name`:
/// the name must be an id, its subject is "KIND `NAME`"; `runs` shows the
/// kind's run ids in the error.
pub(super) fn named<'s>(
    source: &'s Source<'s>,
    kind: &str,
    name: &Spanned<String>,
    runs: &str,
) -> Result<Section<'s>, Error> {
    let at = name.span().start;
    if name.get_ref().is_empty() {
        return Err(source
            .section(kind, at)
            .invalid(name, "name", "must not be empty"));
    }
    let section = source.section(format!("{kind} `{}`", name.get_ref()), at);
    if !is_id(name.get_ref()) {
        return Err(section.invalid(
            name,
            "name",
            format!("{kind} names use letters, digits and `_ . : -` (run ids are `{runs}`)"),
        ));
    }
    Ok(section)
}

/// Where a target's run commands go: `topic` when written, else `default`
/// (derived from `name`, so an error about it points at the name).
pub(super) fn run_topic(
    section: &Section<'_>,
    topic: Option<&Spanned<String>>,
    default: String,
    name: &Spanned<String>,
    kind: &str,
    topics: &Topics,
) -> Result<String, Error> {
    if let Some(topic) = topic {
        return written_topic(section, topic, kind, topics);
    }
    if !is_topic_name(&default) {
        return Err(section.invalid(
            name,
            "topic",
            format!(
                "the default run topic `{default}` is not a Kafka topic name \
                 (no `:`, at most 249 characters); set `topic`"
            ),
        ));
    }
    not_own(section, &default, name.span().start, kind, topics)?;
    Ok(default)
}

/// A run topic written as `topic`: a Kafka topic name, and not one of
/// Reactor's own topics but the shared run topic.
pub(super) fn written_topic(
    section: &Section<'_>,
    topic: &Spanned<String>,
    kind: &str,
    topics: &Topics,
) -> Result<String, Error> {
    kafka_topic(section, topic, "topic")?;
    not_own(section, topic.get_ref(), topic.span().start, kind, topics)?;
    Ok(topic.get_ref().clone())
}

/// Checks that `topic`, the value of `field`, is a Kafka topic name.
pub(super) fn kafka_topic(
    section: &Section<'_>,
    topic: &Spanned<String>,
    field: &str,
) -> Result<(), Error> {
    if is_topic_name(topic.get_ref()) {
        return Ok(());
    }
    Err(section.invalid(
        topic,
        field,
        format!(
            "`{}` is not a Kafka topic name: use 1 to 249 ASCII letters, digits and `_ . -`",
            topic.get_ref()
        ),
    ))
}

fn not_own(
    section: &Section<'_>,
    topic: &str,
    at: usize,
    kind: &str,
    topics: &Topics,
) -> Result<(), Error> {
    match topics.own().find(|(_, own)| *own == topic) {
        Some((field, _)) => Err(section.error(
            at,
            "topic",
            format!(
                "`{topic}` is Reactor's own topic (kafka.{field}); \
                 give the {kind} a run topic of its own"
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        for ok in ["a", "Price_v2.eu:fast-lane", "0"] {
            assert!(is_id(ok), "{ok}");
        }
        for bad in ["", "a/b", "a#1", "a b", "цена"] {
            assert!(!is_id(bad), "{bad}");
        }
    }

    #[test]
    fn topic_names() {
        for ok in ["a", "job.send_tx.runs", "A-b_c.1"] {
            assert!(is_topic_name(ok), "{ok}");
        }
        let long = "x".repeat(250);
        for bad in ["", ".", "..", "a/b", "a:b", "a b", long.as_str()] {
            assert!(!is_topic_name(bad), "{bad}");
        }
    }
}
