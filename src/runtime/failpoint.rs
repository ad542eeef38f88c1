//! A crash on purpose, for tests that must kill an instance at an exact
//! point of its commit rather than wherever a SIGKILL happens to land.
//!
//! `REACTOR_FAILPOINT=before_commit:N` aborts the process on its `N`th
//! commit of records or input offsets, after every output and changelog record was
//! delivered (inside the open transaction, or, with exactly-once off,
//! acknowledged by the brokers) and before the transaction commits (or
//! the input offsets are committed). Unset, it costs one relaxed load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable naming the failpoint.
pub const VAR: &str = "REACTOR_FAILPOINT";

/// The one failpoint there is.
const BEFORE_COMMIT: &str = "before_commit";

fn armed() -> Option<u64> {
    static AT: OnceLock<Option<u64>> = OnceLock::new();
    *AT.get_or_init(|| {
        let value = std::env::var(VAR).ok()?;
        let n = value.strip_prefix(BEFORE_COMMIT)?.strip_prefix(':')?;
        match n.parse() {
            Ok(n) => Some(n),
            Err(_) => {
                tracing::warn!(value, "{VAR}: expected `{BEFORE_COMMIT}:N`; ignored");
                None
            }
        }
    })
}

/// Called once per commit, at the failpoint.
pub(super) fn before_commit() {
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let Some(at) = armed() else {
        return;
    };
    if SEEN.fetch_add(1, Ordering::Relaxed) + 1 == at {
        tracing::error!("{VAR}={BEFORE_COMMIT}:{at}: aborting the process on purpose");
        std::process::abort();
    }
}
