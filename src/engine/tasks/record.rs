//! Conversion between a task's runtime state and its changelog record.
//! Records name parameters (`entity/param`) because parameter ids are local
//! to one engine.

use jiff::Timestamp;

use super::{Cold, Flight, Rare, TaskRt, Tasks, UNSET};
use crate::changelog::{ChangelogRecord, Store, Value};
use crate::codec::{self, ParamKey, TaskFields};
use crate::ctl::{CtlTable, ParamId, ParamName, ParamValues};
use crate::engine::Error;
use crate::stamp::{self, Stamp};
use crate::task::{InPlace, TaskRecord, ValueList};
use crate::trigger::Trigger;

impl Tasks {
    /// The changelog record of task `i` as its step writes it: encoded
    /// straight from the task ([`codec::encode_task_fields`]), the bytes
    /// [`Tasks::record`]'s record encodes to.
    pub(in crate::engine) fn encoded(&self, i: u32) -> Result<ChangelogRecord, Error> {
        let task = self.task(i)?;
        let rt = &task.rt;
        let rare = rt.rare();
        let snapshot = Named::of(&self.table, rt.snapshot());
        let last_seen = Named::of(&self.table, &rt.last_seen);
        let mut bytes = Vec::new();
        codec::encode_task_fields(
            &TaskFields {
                slot: &rt.slot,
                since: stamp::get(rt.since),
                queued_at: stamp::get(rt.queued_at()),
                snapshot: snapshot.as_slice(),
                last_seen: last_seen.as_slice(),
                last_success: stamp::get(rt.last_success),
                sla_due: rare.sla_due,
                hold: rare.hold.as_ref(),
                pause_requested: rare.pause_requested,
                launch: rare.launch.as_ref(),
                again: rare.again.as_ref(),
                cron_at: rare.cron_at,
                source: rare.source.as_deref(),
            },
            &mut bytes,
        );
        Ok(ChangelogRecord {
            store: Store::Task,
            key: task.def.id().into(),
            value: Some(Value::TaskEncoded(bytes)),
        })
    }

    /// Checks that every task's [`Tasks::encoded`] bytes are what its
    /// [`Tasks::record`] encodes to; the first that differs, if any.
    #[cfg(test)]
    pub(in crate::engine) fn first_record_written_otherwise(&self) -> Option<String> {
        (0..u32::try_from(self.tasks.len()).unwrap_or(u32::MAX)).find_map(|i| {
            let record = self.record(i).ok()?;
            let mut theirs = Vec::new();
            codec::encode_value_into(&record.key, record.value?, &mut theirs);
            let ours = match self.encoded(i).ok()?.value {
                Some(Value::TaskEncoded(bytes)) => bytes,
                other => return Some(format!("{other:?}")),
            };
            (ours != theirs).then(|| format!("task {}: {ours:?} != {theirs:?}", record.key))
        })
    }

    pub(in crate::engine) fn record(&self, i: u32) -> Result<ChangelogRecord, Error> {
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
            key: task.def.id().into(),
            value: Some(Value::Task(Box::new(record))),
        })
    }

    /// The state task `i` (entry index) restores from its record `r`, whose
    /// parameter values `placed` holds when they were read in place.
    pub(super) fn rt_from_record(
        &mut self,
        i: u32,
        key: &str,
        r: TaskRecord,
        placed: InPlace<'_>,
    ) -> Result<TaskRt, Error> {
        let trigger = self
            .tasks
            .get(i as usize)
            .and_then(|e| self.defs.get(e.def as usize))
            .map(|task| &task.def.trigger);
        let table = &mut self.table;
        let mut ids = |list: ValueList, owned: &ParamValues| {
            let in_place = || {
                placed
                    .values
                    .iter()
                    .filter(move |v| v.list == list)
                    .map(|v| {
                        (
                            placed.bytes.get(v.name.clone()).unwrap_or_default(),
                            v.value,
                        )
                    })
            };
            // Read as a map of names reads them (name order, the last of a
            // name kept): values in place are so when Reactor wrote them
            // (the check `NameMap::from` makes), and made so first when not.
            if in_place().is_sorted_by(|a, b| a.0 < b.0) {
                let n = in_place().count() + owned.iter().len();
                param_ids(trigger, table, key, n, in_place().chain(named_bytes(owned)))
            } else {
                let values: ParamValues = in_place()
                    .map(|(name, v)| (String::from_utf8_lossy(name), v))
                    .collect();
                let n = values.iter().len();
                param_ids(trigger, table, key, n, named_bytes(&values))
            }
        };
        let rare = Rare {
            sla_due: r.sla_due,
            hold: r.hold,
            pause_requested: r.pause_requested,
            launch: r.launch,
            again: r.again,
            cron_at: r.cron_at,
            source: r.source,
        };
        let mut rt = TaskRt {
            slot: r.slot,
            since: r.since.map(Stamp::from),
            last_seen: ids(ValueList::LastSeen, &r.last_seen)?.into(),
            last_success: r.last_success.map(Stamp::from),
            cold: Some(Box::new(Cold {
                flight: Flight {
                    queued_at: r.queued_at.map(Stamp::from),
                    snapshot: ids(ValueList::Snapshot, &r.snapshot)?.into(),
                },
                // Boxed only when set: most tasks set none of it.
                rare: (rare != UNSET).then(|| Box::new(rare)),
            })),
        };
        rt.tidy();
        Ok(rt)
    }
}

/// A task's parameter values under their names, in name order (the order
/// of a [`crate::ctl::ParamValues`]): on the stack for the few a task
/// names.
enum Named<'a> {
    /// Up to [`FEW`] values, the first `.1` set.
    Few([(ParamKey<'a>, Timestamp); FEW], usize),
    /// More.
    Many(Vec<(ParamKey<'a>, Timestamp)>),
}

/// Values [`Named`] keeps on the stack.
const FEW: usize = 4;

impl<'a> Named<'a> {
    // Inlined into the record's writer: returned by value, its entries
    // were copied out on every call.
    #[inline(always)]
    fn of(table: &'a CtlTable, values: &[(ParamId, Stamp)]) -> Named<'a> {
        let named = values.iter().map(|&(p, v)| {
            let name = table.name(p);
            (ParamKey::Parts(name.entity, name.param), v.get())
        });
        let mut named = if values.len() <= FEW {
            let mut few = [(ParamKey::Joined(""), Timestamp::UNIX_EPOCH); FEW];
            for (slot, entry) in few.iter_mut().zip(named) {
                *slot = entry;
            }
            Named::Few(few, values.len())
        } else {
            Named::Many(named.collect())
        };
        // By the joined name, as a map of names orders them (`a.b/x` before
        // `a/x`, where comparing the entities first would not).
        fn joined<'k>(key: &ParamKey<'k>) -> impl Iterator<Item = u8> + 'k {
            let (entity, slash, param) = match *key {
                ParamKey::Parts(entity, param) => (entity, "/", param),
                ParamKey::Joined(name) => (name, "", ""),
            };
            entity.bytes().chain(slash.bytes()).chain(param.bytes())
        }
        named
            .as_mut_slice()
            .sort_unstable_by(|(a, _), (b, _)| joined(a).cmp(joined(b)));
        named
    }

    fn as_slice(&self) -> &[(ParamKey<'a>, Timestamp)] {
        match self {
            Named::Few(few, n) => few.get(..*n).unwrap_or_default(),
            Named::Many(many) => many,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [(ParamKey<'a>, Timestamp)] {
        match self {
            Named::Few(few, n) => few.get_mut(..*n).unwrap_or_default(),
            Named::Many(many) => many,
        }
    }
}

/// The configuration's id of the parameter named `name` among those
/// `trigger` reads.
fn own_param(trigger: &Trigger<ParamId>, table: &CtlTable, name: &[u8]) -> Option<ParamId> {
    let slash = name.iter().position(|&b| b == b'/')?;
    let (entity, param) = (name.get(..slash)?, name.get(slash + 1..)?);
    let mut found = None;
    trigger.for_each_param(&mut |&p| {
        let known = table.global().name(p);
        if found.is_none() && known.entity.as_bytes() == entity && known.param.as_bytes() == param {
            found = Some(p);
        }
    });
    found
}

/// The shard's ids of the `n` parameter `names` of task `key` (its trigger
/// `trigger`), interned in `table` as needed.
fn param_ids<'n>(
    trigger: Option<&Trigger<ParamId>>,
    table: &mut CtlTable,
    key: &str,
    n: usize,
    names: impl Iterator<Item = (&'n [u8], Timestamp)>,
) -> Result<Vec<(ParamId, Stamp)>, Error> {
    // Sized first: the list ends boxed, and one grown as it was collected
    // was allocated twice.
    let mut ids = Vec::with_capacity(n);
    for (name, v) in names {
        // The names a record holds are nearly always those its task's
        // trigger reads: matched against those first, a name costs a
        // comparison with bytes that are read anyway (and, equal to a
        // configured name, needs no check), where a lookup among every
        // name of the configuration first missed the cache on a line of
        // its index.
        let id = match trigger.and_then(|t| own_param(t, table, name)) {
            Some(global) => table.intern_global(global),
            None => {
                let bad = |e: String| Error::BadRecord {
                    store: Store::Task.as_str(),
                    key: key.to_string(),
                    message: format!("parameter `{}`: {e}", String::from_utf8_lossy(name)),
                };
                let name = std::str::from_utf8(name).map_err(|e| bad(e.to_string()))?;
                let name = ParamName::parse_parts(name).map_err(|e| bad(e.to_string()))?;
                table.intern(name)
            }
        };
        ids.push((id, Stamp::from(v)));
    }
    Ok(ids)
}

/// Each of `values` as its name's bytes and its value.
fn named_bytes(values: &ParamValues) -> impl Iterator<Item = (&[u8], Timestamp)> {
    values.iter().map(|(name, v)| (name.as_bytes(), *v))
}
