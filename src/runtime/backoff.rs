//! The one backoff of the shell: doubling delays between retries of
//! something that failed for a reason that may pass (a broker down).

use std::time::Duration;

/// Doubling delays from `first` up to `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays `first`, `2 × first`, … capped at `max`.
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// The delay before the next retry.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Starts again from `first` (after a success that lasted).
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

impl Default for Backoff {
    /// 200 ms doubling up to 10 s: retries of broker calls.
    fn default() -> Backoff {
        Backoff::new(Duration::from_millis(200), Duration::from_secs(10))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(350));
        let delays: Vec<_> = (0..4).map(|_| b.next_delay()).collect();
        assert_eq!(delays, [ms(100), ms(200), ms(350), ms(350)]);
        b.reset();
        assert_eq!(b.next_delay(), ms(100));
        assert_eq!(Backoff::default().next_delay(), ms(200));
    }
}
