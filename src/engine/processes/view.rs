//! Read-only views of processes and jobs for the admin API, the simulator
//! and metrics.

use serde::Serialize;

use super::Processes;
use crate::process::{instance_id, KeyRecord};

/// A process key as an operator sees it (`/processes/{name}/{key}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyView {
    /// The process.
    pub process: String,
    /// The key.
    pub key: String,
    /// The active instance's id, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The current step's job, if an instance is active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The record: context, active instance, waiting launches, last outcome, goal.
    pub record: KeyRecord,
}

/// Live figures of one job type on one shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobStats {
    /// The job.
    pub job: String,
    /// Steps waiting in the live lane.
    pub queued: usize,
    /// Steps waiting in the low-priority lane.
    pub queued_low: usize,
    /// Steps in flight.
    pub running: u32,
    /// This partition's share of `max_running` (`None`: unlimited).
    pub share: Option<u32>,
}

impl Processes {
    /// The record of `process` for `key`, if this shard has it.
    pub(in crate::engine) fn view(&self, process: &str, key: &str) -> Option<KeyView> {
        let p = self.proc_index(process)?;
        let record = self.record(p, key)?.clone();
        let active = record.active.as_ref();
        Some(KeyView {
            process: process.to_string(),
            key: key.to_string(),
            instance: active.map(|i| instance_id(process, key, i.n)),
            job: active
                .and_then(|i| i.chain.get(i.step as usize))
                .map(|s| s.job.clone()),
            record,
        })
    }

    /// The run in flight of `process`'s active instance for `key`, and the
    /// run ids and passes of its current step by attempt: what `simulate`
    /// answers a `complete` with.
    pub(in crate::engine) fn current_run(&self, process: &str, key: &str) -> Option<(String, u64)> {
        let p = self.proc_index(process)?;
        let run = self.record(p, key)?.active.as_ref()?.slot.current()?;
        Some((run.run_id.as_str().to_owned(), run.pass))
    }

    /// Queue depths and running counts per job.
    pub(in crate::engine) fn job_stats(&self) -> Vec<JobStats> {
        self.jobs
            .iter()
            .map(|j| {
                let (queued, queued_low) = j.queue.depth();
                JobStats {
                    job: j.def.name.to_string(),
                    queued,
                    queued_low,
                    running: j.running,
                    share: j.share,
                }
            })
            .collect()
    }

    /// Active instances per process (for metrics).
    pub(in crate::engine) fn active_counts(&self) -> Vec<(String, usize)> {
        let mut counts = vec![0usize; self.procs.len()];
        for (p, record) in self.keys.unordered() {
            if record.active.is_some() {
                if let Some(c) = counts.get_mut(p as usize) {
                    *c += 1;
                }
            }
        }
        self.procs
            .iter()
            .zip(counts)
            .map(|(p, c)| (p.name.clone(), c))
            .collect()
    }
}
