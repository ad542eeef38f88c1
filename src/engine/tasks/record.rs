//! Conversion between a task's runtime state and its changelog record.
//! Records name parameters (`entity/param`) because parameter ids are local
//! to one engine.

use super::{Cold, Flight, Rare, TaskRt, Tasks};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::ctl::{ParamId, ParamName, ParamValues};
use crate::engine::Error;
use crate::stamp::{self, Stamp};
use crate::task::TaskRecord;

impl Tasks {
    pub(super) fn record(&self, i: u32) -> Result<ChangelogRecord, Error> {
        let task = self.task(i)?;
        let rt = &task.rt;
        let named = |values: &[(ParamId, Stamp)]| -> ParamValues {
            values
                .iter()
                .map(|&(p, v)| (self.table.name(p).joined(), v.get()))
                .collect()
        };
        let record = TaskRecord {
            slot: rt.slot.clone(),
            since: stamp::get(rt.since),
            queued_at: stamp::get(rt.queued_at()),
            snapshot: named(rt.snapshot()),
            last_seen: named(&rt.last_seen),
            last_success: stamp::get(rt.last_success),
            sla_due: rt.rare().sla_due,
            hold: rt.rare().hold,
            pause_requested: rt.rare().pause_requested,
            launch: rt.rare().launch.clone(),
            again: rt.rare().again.clone(),
            cron_at: rt.rare().cron_at,
            source: rt.rare().source.clone(),
        };
        Ok(ChangelogRecord {
            store: Store::Task,
            key: String::from(task.def.id()),
            value: Some(Value::Task(Box::new(record))),
        })
    }

    pub(super) fn rt_from_record(&mut self, key: &str, r: &TaskRecord) -> Result<TaskRt, Error> {
        let mut ids = |values: &ParamValues| {
            values
                .iter()
                .map(|(name, v)| {
                    let name: ParamName = name.parse().map_err(|e| Error::BadRecord {
                        store: Store::Task.as_str(),
                        key: key.to_string(),
                        message: format!("parameter `{name}`: {e}"),
                    })?;
                    Ok((self.table.intern(name.parts()), Stamp::from(*v)))
                })
                .collect::<Result<Vec<_>, Error>>()
        };
        let mut rt = TaskRt {
            slot: r.slot.clone(),
            since: r.since.map(Stamp::from),
            last_seen: ids(&r.last_seen)?.into(),
            last_success: r.last_success.map(Stamp::from),
            cold: Some(Box::new(Cold {
                flight: Flight {
                    queued_at: r.queued_at.map(Stamp::from),
                    snapshot: ids(&r.snapshot)?.into(),
                },
                rare: Some(Box::new(Rare {
                    sla_due: r.sla_due,
                    hold: r.hold,
                    pause_requested: r.pause_requested,
                    launch: r.launch.clone(),
                    again: r.again.clone(),
                    cron_at: r.cron_at,
                    source: r.source.clone(),
                })),
            })),
        };
        rt.tidy();
        Ok(rt)
    }
}
