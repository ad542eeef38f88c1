//! Conversion between a task's runtime state and its changelog record.
//! Records name parameters (`entity/param`) because parameter ids are local
//! to one engine.

use std::collections::BTreeMap;

use jiff::Timestamp;

use super::{Engine, Error, TaskRt};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::ctl::{ParamId, ParamName};
use crate::task::TaskRecord;

impl Engine {
    pub(super) fn record(&self, i: u32) -> ChangelogRecord {
        let rt = &self.rt[i as usize];
        let named = |values: &[(ParamId, Timestamp)]| -> BTreeMap<String, Timestamp> {
            values
                .iter()
                .map(|&(p, v)| (self.table.name(p).to_string(), v))
                .collect()
        };
        let record = TaskRecord {
            state: rt.state,
            since: rt.since,
            queued_at: rt.queued_at,
            wake_at: rt.wake_at,
            failures: rt.failures,
            run_seq: rt.run_seq,
            pass_seq: rt.pass_seq,
            run: rt.run.clone(),
            snapshot: named(&rt.snapshot),
            last_seen: named(&rt.last_seen),
            last_success: rt.last_success,
            sla_due: rt.sla_due,
            hold: rt.hold,
            pause_requested: rt.pause_requested,
            last_error: rt.last_error.clone(),
        };
        ChangelogRecord {
            store: Store::Task,
            key: self.defs[i as usize].id.clone(),
            value: Some(Value::Task(Box::new(record))),
        }
    }

    pub(super) fn rt_from_record(&mut self, key: &str, r: &TaskRecord) -> Result<TaskRt, Error> {
        let mut ids = |values: &BTreeMap<String, Timestamp>| {
            values
                .iter()
                .map(|(name, v)| {
                    let name: ParamName = name.parse().map_err(|e| Error::BadRecord {
                        store: Store::Task.as_str(),
                        key: key.to_string(),
                        message: format!("parameter `{name}`: {e}"),
                    })?;
                    Ok((self.table.intern(&name), *v))
                })
                .collect::<Result<Vec<_>, Error>>()
        };
        Ok(TaskRt {
            state: r.state,
            since: r.since,
            queued_at: r.queued_at,
            wake_at: r.wake_at,
            failures: r.failures,
            run_seq: r.run_seq,
            pass_seq: r.pass_seq,
            run: r.run.clone(),
            snapshot: ids(&r.snapshot)?,
            last_seen: ids(&r.last_seen)?,
            last_success: r.last_success,
            sla_due: r.sla_due,
            hold: r.hold,
            pause_requested: r.pause_requested,
            last_error: r.last_error.clone(),
            dirty: false,
        })
    }
}
