//! The process chain of the jobs workload, as configuration text. It
//! depends on nothing else in the crate, so that the probe
//! `examples/job_path.rs` includes this very file and counts the work of
//! the chain the bench measures.

use std::fmt::Write;

/// The jobs of the chain, in step order.
pub const STEPS: [&str; 3] = ["reserve", "send", "notify"];

/// The process every launch starts.
pub const PROCESS: &str = "chain";

/// One unlimited job per step with run topic `{prefix}.JOB` and a minute's
/// timeout, and the process [`PROCESS`] over them in [`STEPS`] order.
pub fn toml(prefix: &str) -> String {
    let mut text = String::new();
    for job in STEPS {
        let _ = writeln!(
            text,
            "[[job]]\nname = \"{job}\"\ntopic = \"{prefix}.{job}\"\ntimeout = \"1m\"\n"
        );
    }
    let steps: Vec<String> = STEPS.iter().map(|s| format!("\"{s}\"")).collect();
    let _ = writeln!(
        text,
        "[[process]]\nname = \"{PROCESS}\"\nsteps = [{}]\n",
        steps.join(", ")
    );
    text
}
