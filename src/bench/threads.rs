//! CPU by thread: which part of the process a window's CPU went to, read
//! from `/proc/self/task/*/stat` and grouped by thread name. The harness,
//! the brokers of the mock cluster and the system under test share one
//! process; this says how much of its CPU per record each part took.

/// CPU seconds (user + system) one thread used so far, with its group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThreadCpu {
    /// The thread id.
    pub tid: u32,
    /// What the thread does ([`group`] of its name).
    pub group: &'static str,
    /// CPU seconds so far.
    pub seconds: f64,
}

/// What a thread does, by its name. librdkafka names its threads alike in
/// every client, so the client threads of Reactor and of the harness (its
/// producer and reader) fall in one group.
pub fn group(name: &str) -> &'static str {
    match name {
        "reactor-runtime" => "runtime",
        "reactor-commit" => "committer",
        "rdk:mock" => "mock brokers",
        "bench-baseline" => "baseline loop",
        "bench-worker" => "bench workers",
        // rdkafka's polling thread of a threaded producer (named
        // "producer polling thread", cut to 15 bytes by the kernel).
        "producer pollin" => "librdkafka clients",
        n if n.starts_with("rdk:") => "librdkafka clients",
        n if n.starts_with("reactor-") => "Reactor, other",
        // The bench's own: its reader (the main thread), its producer, the
        // CPU sampler (`bench-cpu`).
        _ => "harness",
    }
}

/// Every thread of this process now; empty where `/proc` is not readable.
pub fn sample() -> Vec<ThreadCpu> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let tid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        parse(tid, &stat)
    })
    .collect()
}

/// A thread's `stat` line: its name in parentheses (it may hold spaces and
/// parentheses itself), then the state and the fields after it, user time
/// the 12th and system time the 13th, in the kernel's USER_HZ (100).
fn parse(tid: u32, stat: &str) -> Option<ThreadCpu> {
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some(ThreadCpu {
        tid,
        group: group(name),
        seconds: (utime + stime) / 100.0,
    })
}

/// CPU seconds by group between two samples, the largest first. A thread
/// missing from `from` started in between and counts from zero; one
/// missing from `to` ended in between and its share is lost (no thread a
/// bench measures ends inside its window).
pub fn between(from: &[ThreadCpu], to: &[ThreadCpu]) -> Vec<(&'static str, f64)> {
    let mut groups: Vec<(&'static str, f64)> = Vec::new();
    for t in to {
        let before = from
            .iter()
            .find(|f| f.tid == t.tid)
            .map_or(0.0, |f| f.seconds);
        let used = (t.seconds - before).max(0.0);
        match groups.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, s)) => *s += used,
            None => groups.push((t.group, used)),
        }
    }
    groups.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_whatever_the_name_holds() {
        let line = "4242 (producer pollin) S 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0";
        assert_eq!(
            parse(4242, line),
            Some(ThreadCpu {
                tid: 4242,
                group: "librdkafka clients",
                seconds: 3.25
            })
        );
        let odd = "7 (a (b) c) R 1 2 3 4 5 6 7 8 9 10 1 2 0";
        assert_eq!(
            parse(7, odd).map(|t| (t.group, t.seconds)),
            Some(("harness", 0.03))
        );
        assert_eq!(parse(7, "7 (x) R 1 2"), None);
    }

    #[test]
    fn threads_are_summed_by_group_from_their_first_sample() {
        let t = |tid, group, seconds| ThreadCpu {
            tid,
            group,
            seconds,
        };
        let from = [t(1, "runtime", 1.0), t(2, "librdkafka clients", 0.5)];
        let to = [
            t(1, "runtime", 3.0),
            t(2, "librdkafka clients", 1.0),
            // Started inside the window.
            t(3, "librdkafka clients", 0.25),
        ];
        assert_eq!(
            between(&from, &to),
            [("runtime", 2.0), ("librdkafka clients", 0.75)]
        );
        assert!(sample().iter().any(|t| t.seconds >= 0.0));
    }

    #[test]
    fn names_map_to_groups() {
        assert_eq!(group("reactor-runtime"), "runtime");
        assert_eq!(group("rdk:broker2"), "librdkafka clients");
        assert_eq!(group("rdk:mock"), "mock brokers");
        assert_eq!(group("reactor-restore"), "Reactor, other");
        assert_eq!(group("reactor"), "harness");
    }
}
