//! Seconds since each task's last success, exported as
//! [`TASK_SECONDS_SINCE_SUCCESS`] for the stalest tasks this instance owns.
//!
//! Not through the recorder: a gauge per task cost ~300 bytes of the
//! recorder's memory and ~800 ns a set for every task that ever succeeded
//! (a million tasks: ~300 MB, ~0.8 s of the runtime thread per health
//! pass, and a 56 MB scrape taking seconds to render), and a gauge can
//! never be dropped, so an instance kept exporting the frozen age of every
//! task whose shard had moved away. Each health pass instead keeps the
//! [`TaskAges::limit`] stalest tasks of the shards it walked and publishes
//! them whole; `/metrics` appends them to the recorder's text. A deployment
//! with fewer tasks per instance than the limit exports every task that
//! ever succeeded, as before; a larger one exports the stalest, the ones an
//! alert on staleness is about.

use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use jiff::Timestamp;

use super::{TASK_SECONDS_SINCE_SUCCESS, TASK_SECONDS_SINCE_SUCCESS_HELP};

/// Series exported by default (`reactor run --task-age-series`).
pub const DEFAULT_SERIES: usize = 10_000;

/// The ages the last health pass published, shared by the runtime (which
/// publishes) and the admin API (which renders them).
#[derive(Debug)]
pub struct TaskAges {
    limit: usize,
    /// `(task, seconds since its last success)`, stalest first.
    published: Mutex<Vec<(String, f64)>>,
}

impl TaskAges {
    /// Nothing published yet; passes will keep the `limit` stalest tasks.
    pub fn new(limit: usize) -> Arc<TaskAges> {
        Arc::new(TaskAges {
            limit,
            published: Mutex::new(Vec::new()),
        })
    }

    /// The most series exported.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Replaces what was published with what a pass found.
    pub fn publish(&self, stalest: Stalest) {
        let ages = stalest.into_ages();
        *self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = ages;
    }

    /// What is published: `(task, seconds)`, stalest first.
    pub fn published(&self) -> Vec<(String, f64)> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Appends the published ages to `out` in the Prometheus text format
    /// (nothing when none is published, as the recorder omits a metric
    /// without series).
    pub fn render_into(&self, out: &mut String) {
        let published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if published.is_empty() {
            return;
        }
        let name = TASK_SECONDS_SINCE_SUCCESS;
        let _ = writeln!(out, "# HELP {name} {TASK_SECONDS_SINCE_SUCCESS_HELP}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (task, seconds) in published.iter() {
            out.push_str(name);
            out.push_str("{task=\"");
            escape_label(task, out);
            let _ = writeln!(out, "\"}} {seconds}");
        }
        out.push('\n');
    }
}

/// A label value as the text format writes it: backslash, double quote and
/// line feed escaped.
fn escape_label(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The stalest tasks seen by a pass: at most `limit`, the earliest last
/// successes (ties by task id). A task that does not qualify costs a
/// comparison, not an allocation.
#[derive(Debug, Default)]
pub struct Stalest {
    limit: usize,
    /// Max-heap on the last success: its top is the freshest kept, the
    /// first to go when a staler task comes.
    kept: BinaryHeap<(Timestamp, String)>,
    /// When the pass read the tasks.
    now: Option<Timestamp>,
}

impl Stalest {
    /// Keeps at most `limit` tasks.
    pub fn new(limit: usize) -> Stalest {
        Stalest {
            limit,
            ..Stalest::default()
        }
    }

    /// Task `id` last succeeded at `last`, read at `now`.
    pub fn offer(&mut self, id: &str, last: Timestamp, now: Timestamp) {
        self.now = Some(self.now.map_or(now, |n| n.max(now)));
        if self.kept.len() < self.limit {
            self.kept.push((last, id.to_string()));
            return;
        }
        let staler = self
            .kept
            .peek()
            .is_some_and(|(top, top_id)| (last, id) < (*top, top_id.as_str()));
        if staler {
            self.kept.pop();
            self.kept.push((last, id.to_string()));
        }
    }

    /// `(task, seconds since its last success)`, stalest first, at the
    /// latest reading of the pass.
    fn into_ages(self) -> Vec<(String, f64)> {
        let now = self.now.unwrap_or(Timestamp::UNIX_EPOCH);
        let mut kept = self.kept.into_vec();
        kept.sort_unstable();
        kept.into_iter()
            .map(|(last, id)| (id, now.duration_since(last).as_secs_f64().max(0.0)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: u32) -> Timestamp {
        Timestamp::from_second(i64::from(s)).unwrap()
    }

    #[test]
    fn a_pass_keeps_the_stalest_tasks_stalest_first() {
        let ages = TaskAges::new(3);
        let mut pass = Stalest::new(ages.limit());
        let now = ts(1_000);
        for (id, last) in [("a", 500), ("b", 100), ("c", 900), ("d", 300), ("e", 100)] {
            pass.offer(id, ts(last), now);
        }
        ages.publish(pass);
        assert_eq!(
            ages.published(),
            [
                ("b".to_string(), 900.0),
                ("e".to_string(), 900.0),
                ("d".to_string(), 700.0)
            ]
        );
        // The next pass replaces it whole: a task no longer walked (its
        // shard moved away) is no longer exported.
        let mut pass = Stalest::new(ages.limit());
        pass.offer("c", ts(900), ts(1_010));
        ages.publish(pass);
        assert_eq!(ages.published(), [("c".to_string(), 110.0)]);
        ages.publish(Stalest::new(0));
        assert!(ages.published().is_empty());
    }

    #[test]
    fn no_limit_keeps_none() {
        let mut pass = Stalest::new(0);
        pass.offer("a", ts(1), ts(2));
        assert!(pass.into_ages().is_empty());
    }

    /// A heap of the kept tasks against sorting all of them.
    #[test]
    fn the_kept_tasks_are_those_a_sort_would_keep() {
        let tasks: Vec<(String, Timestamp)> = (0..500u32)
            .map(|i| (format!("t{i}"), ts((i * 7919) % 211)))
            .collect();
        for limit in [0, 1, 10, 211, 499, 500, 600] {
            let mut pass = Stalest::new(limit);
            for (id, last) in &tasks {
                pass.offer(id, *last, ts(1_000));
            }
            let mut sorted = tasks.clone();
            sorted.sort_by(|(a, x), (b, y)| (x, a).cmp(&(y, b)));
            let want: Vec<(String, f64)> = sorted
                .into_iter()
                .take(limit)
                .map(|(id, last)| (id, ts(1_000).duration_since(last).as_secs_f64()))
                .collect();
            assert_eq!(pass.into_ages(), want, "limit {limit}");
        }
    }

    #[test]
    fn rendered_as_a_gauge_with_escaped_labels() {
        let ages = TaskAges::new(10);
        let mut out = String::new();
        ages.render_into(&mut out);
        assert_eq!(out, "", "no series, no metric");
        let mut pass = Stalest::new(10);
        pass.offer("daily", ts(10), ts(100));
        pass.offer("odd\"na\\me\n", ts(99), ts(100));
        ages.publish(pass);
        ages.render_into(&mut out);
        assert_eq!(
            out,
            format!(
                "# HELP reactor_task_seconds_since_success {TASK_SECONDS_SINCE_SUCCESS_HELP}\n\
                 # TYPE reactor_task_seconds_since_success gauge\n\
                 reactor_task_seconds_since_success{{task=\"daily\"}} 90\n\
                 reactor_task_seconds_since_success{{task=\"odd\\\"na\\\\me\\n\"}} 1\n\n"
            )
        );
    }
}
