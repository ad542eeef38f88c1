//! Lines logged per record — a dead letter, an oversized output, a failed
//! delivery, an unreadable changelog record — let
//! through [`BURST`] per topic and [`WINDOW`], then held back and counted.
//! A flood of bad records (a producer writing garbage at full rate) wrote a
//! line per record: gigabytes of logs for a log shipper to carry, and the
//! formatting a share of the runtime thread, where the counters already
//! count every record. The next line let through says how many were held
//! back before it; [`flush_held_lines`] reports a window's held lines when
//! no further line comes.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Lines let through per topic and window.
pub const BURST: u32 = 20;
/// The window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// One topic's window.
#[derive(Debug)]
struct Window {
    topic: String,
    started: Instant,
    let_through: u32,
    held: u64,
}

/// The windows of one kind of line, by topic (topics are few: configured
/// input and output topics).
#[derive(Debug)]
pub(super) struct Throttle {
    windows: Vec<Window>,
}

impl Throttle {
    /// No window yet (a `static`'s initial value).
    pub(super) const fn new() -> Throttle {
        Throttle {
            windows: Vec::new(),
        }
    }

    /// Whether a line about `topic` is logged at `now`: `Some(held)` with
    /// the lines held back since the last one let through, `None` when
    /// this one is held back (and counted).
    pub(super) fn admit(&mut self, topic: &str, now: Instant) -> Option<u64> {
        let w = match self.windows.iter().position(|w| w.topic == topic) {
            Some(i) => self.windows.get_mut(i)?,
            None => {
                self.windows.push(Window {
                    topic: topic.to_string(),
                    started: now,
                    let_through: 0,
                    held: 0,
                });
                self.windows.last_mut()?
            }
        };
        if now.saturating_duration_since(w.started) >= WINDOW {
            w.started = now;
            w.let_through = 0;
        }
        if w.let_through < BURST {
            w.let_through += 1;
            return Some(std::mem::take(&mut w.held));
        }
        w.held += 1;
        None
    }

    /// Topics whose window ended at `now` with lines held back, and how
    /// many; their windows start again.
    pub(super) fn expired(&mut self, now: Instant) -> Vec<(String, u64)> {
        self.windows
            .iter_mut()
            .filter(|w| w.held > 0 && now.saturating_duration_since(w.started) >= WINDOW)
            .map(|w| {
                w.started = now;
                w.let_through = 0;
                (w.topic.clone(), std::mem::take(&mut w.held))
            })
            .collect()
    }
}

/// Dead-letter lines.
pub(super) static DEAD_LETTER_LINES: Mutex<Throttle> = Mutex::new(Throttle::new());
/// Failed-delivery lines.
pub(super) static DELIVERY_LINES: Mutex<Throttle> = Mutex::new(Throttle::new());
/// Lines of changelog records a restore skipped.
pub(super) static SKIPPED_LINES: Mutex<Throttle> = Mutex::new(Throttle::new());
/// Oversized-output lines.
pub(super) static OVERSIZE_LINES: Mutex<Throttle> = Mutex::new(Throttle::new());

/// Whether a line of `lines` about `topic` is logged now (see
/// [`Throttle::admit`]).
pub(super) fn admit(lines: &Mutex<Throttle>, topic: &str) -> Option<u64> {
    lines
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .admit(topic, Instant::now())
}

/// Logs how many lines each ended window held back (the runtime calls it
/// every few seconds).
pub fn flush_held_lines() {
    let now = Instant::now();
    // What each kind's summary says, the counter that counts every one
    // (where there is one), and whether it is an error.
    let kinds: [(&Mutex<Throttle>, &str, Option<&str>, bool); 4] = [
        (
            &DEAD_LETTER_LINES,
            "dead letters",
            Some(super::DEAD_LETTERS),
            false,
        ),
        (&DELIVERY_LINES, "failed deliveries", None, false),
        (
            &SKIPPED_LINES,
            "unreadable changelog records skipped",
            None,
            true,
        ),
        (
            &OVERSIZE_LINES,
            "oversized outputs",
            Some(super::OUTPUTS_OVERSIZE),
            true,
        ),
    ];
    for (lines, what, counted_in, error) in kinds {
        let held = lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .expired(now);
        for (topic, held_back) in held {
            // A field left out when `None`.
            if error {
                tracing::error!(topic, held_back, counted_in, "{what} not logged one by one");
            } else {
                tracing::warn!(topic, held_back, counted_in, "{what} not logged one by one");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_per_topic_and_window_then_a_count() {
        let mut t = Throttle::new();
        let at = Instant::now();
        for _ in 0..BURST {
            assert_eq!(t.admit("a", at), Some(0));
        }
        for _ in 0..5 {
            assert_eq!(t.admit("a", at), None);
        }
        // Another topic has a window of its own.
        assert_eq!(t.admit("b", at), Some(0));
        // Nothing to report before the window ends.
        assert!(t.expired(at + WINDOW / 2).is_empty());
        // The next window's first line says how many were held back.
        let later = at + WINDOW;
        assert_eq!(t.admit("a", later), Some(5));
        assert_eq!(t.admit("a", later), Some(0));
    }

    #[test]
    fn an_ended_window_reports_what_it_held() {
        let mut t = Throttle::new();
        let at = Instant::now();
        for _ in 0..BURST + 3 {
            t.admit("a", at);
        }
        t.admit("b", at);
        assert_eq!(t.expired(at + WINDOW), [("a".to_string(), 3)]);
        // Reported once, and the next line starts a window afresh.
        assert!(t.expired(at + 3 * WINDOW).is_empty());
        assert_eq!(t.admit("a", at + WINDOW), Some(0));
    }
}
