//! Processes and jobs (seeds 003 and 004, DESIGN §7.2): the durable state of
//! a business key — its context, the active instance with its chain of job
//! steps, the launches waiting behind it, the last outcome — and the job
//! queue every step waits in. The transitions live in the engine next to
//! tasks and offers; the run of each step is the shared
//! [`crate::run::RunSlot`].

mod queue;

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::offer::Body;
use crate::run::RunSlot;

pub use queue::{JobQueue, Lane, Placement};

/// Where a job enters its queue, or where a `next` job enters a chain.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Position {
    /// After everything waiting (the tail).
    #[default]
    Back,
    /// Before everything waiting (the head): the latest front push runs first.
    Front,
}

/// What a launch does while the key has an active instance.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Conflict {
    /// Refused: `launch_rejected` with reason `active`.
    #[default]
    Reject,
    /// Waits behind the active instance (`launch_queued`), in order.
    Queue,
    /// Cancels the active instance (its late results are rejected) and starts.
    Replace,
}

/// Whether a key may get a new instance once one has finished.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Reuse {
    /// Always.
    #[default]
    Allow,
    /// Only when the last instance did not succeed.
    FailedOnly,
    /// Not once an instance succeeded or a step reported the key's goal,
    /// until a `reset_key` (or an event launch with `reset = true`).
    UntilReset,
}

/// How an instance ended (or that it has not). Names are metric labels,
/// log fields and what `last.status` says in a `when` predicate.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Status {
    /// Active: a step is queued, running or waiting for a retry.
    #[default]
    Running,
    /// Every step succeeded.
    Succeeded,
    /// A step died, or its job's deadline passed.
    Failed,
    /// Cancelled by an operator or replaced by a new launch.
    Cancelled,
    /// The process `timeout` passed.
    TimedOut,
}

impl Status {
    /// Metric label and log field.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a launch was refused (the `reason` of `launch_rejected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Refusal {
    /// The key has an active instance and the process says `conflict = "reject"`.
    Active,
    /// The key's last instance (or goal) forbids a new one (`reuse`).
    Reuse,
    /// The process's `when` is false, or failed to evaluate.
    Validation,
}

impl Refusal {
    /// The reason on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A request to start an instance for one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The launch parameters (every step's `params` unless a `next` job says otherwise).
    #[serde(default, skip_serializing_if = "Body::is_empty")]
    pub params: Body,
    /// Where the first step enters its job queue.
    #[serde(default)]
    pub position: Position,
    /// The queue lane: live work, or the low-priority lane of schedules and
    /// recoveries.
    #[serde(default)]
    pub lane: Lane,
    /// Overrides the process priority (a submitted job's own priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Clear the key's goal before deciding (an event launch with `reset = true`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
    /// What caused it: `op:ID`, `auto`, `schedule`, `event:TOPIC`; none for a
    /// plain command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When it was asked for.
    pub at: Timestamp,
}

/// One link of an instance's chain: a job with its own parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The job's name.
    pub job: String,
    /// Parameters of this step; `None`: the instance's launch parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Body>,
}

/// A job a step's result adds to its own chain (seed 004's recursive jobs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextJob {
    /// The job's name.
    pub job: String,
    /// Its parameters; absent: the instance's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Body>,
    /// `front`: right after the current step; `back`: after the last.
    #[serde(default)]
    pub position: Position,
}

/// The active instance of a key: its chain, where it is, and the run of
/// its current step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// `#N`: the key's N-th instance.
    pub n: u64,
    /// The launch parameters.
    #[serde(default, skip_serializing_if = "Body::is_empty")]
    pub params: Body,
    /// Every finished step's `output`, merged in order.
    #[serde(default, skip_serializing_if = "Body::is_empty")]
    pub context: Body,
    /// The jobs to run, in order; steps before `step` are done.
    pub chain: Vec<Step>,
    /// Index of the current step.
    pub step: u32,
    /// The current step's run lifecycle (queued, running, backoff, parked).
    pub slot: RunSlot,
    /// The current step's place in its job queue while it is queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<Placement>,
    /// The current step's job deadline (from its first enqueue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_deadline: Option<Timestamp>,
    /// The deadline passed during a run with `force_finish = false`: the
    /// step fails for good when this attempt ends without success.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overdue: bool,
    /// Queue priority of its steps.
    #[serde(default)]
    pub priority: i64,
    /// Queue lane of its steps.
    #[serde(default)]
    pub lane: Lane,
    /// When it started.
    pub started_at: Timestamp,
    /// Last progress of a step (dispatch or result): the idle clock.
    pub progress_at: Timestamp,
    /// What caused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Runs started by the instance, every step counted.
    #[serde(default)]
    pub runs: u64,
    /// Where a new step's run numbers start: 0, or after a recovery the
    /// runs started before it, so that a restarted chain never repeats a
    /// run id.
    #[serde(default)]
    pub seq_base: u64,
}

/// How a key's last instance ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// `#N` of the instance.
    pub n: u64,
    /// How it ended.
    pub status: Status,
    /// When.
    pub finished_at: Timestamp,
    /// Its context when it ended.
    #[serde(default, skip_serializing_if = "Body::is_empty")]
    pub context: Body,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failed, timed-out or cancelled instance as it ended: an operator
    /// may restart it from a step or retry its step (`recover`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<Box<InstanceRecord>>,
}

/// Everything a shard keeps about one process and one key: the seed's
/// "through context" (active instance, last outcome, goal) and the launches
/// waiting behind the active instance. Changelog `process/<PROCESS>/<KEY>`.
///
/// Instance numbers `#N` come from a counter per process on the shard
/// (changelog `seq/<PROCESS>`), not from the key: a finished key's record
/// may be dropped (`reuse = "allow"`), and a later instance of the key must
/// still never reuse an instance id, nor its runs a run id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The active instance; at most one, always.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<InstanceRecord>,
    /// Launches waiting for the active instance to end (`conflict = "queue"`,
    /// submitted jobs), in the order they will start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<Launch>,
    /// How the last instance ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<Outcome>,
    /// A step reported the key's goal (or an instance succeeded under
    /// `reuse = "until_reset"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub goal: bool,
}

impl KeyRecord {
    /// Nothing is active or waiting.
    pub fn is_idle(&self) -> bool {
        self.active.is_none() && self.waiting.is_empty()
    }
}

/// A process schedule's state on one shard.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// The last cron instant served (or being served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_fire: Option<Timestamp>,
    /// A run in progress: where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Instances launched by the run in progress (or the last one).
    #[serde(default)]
    pub launched: u64,
}

/// Where a schedule run is: the next index of a key list, or the last
/// offer id checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cursor {
    /// The next key of the static list.
    Key(u64),
    /// The last offer id checked (`None`: none yet).
    Offer(Option<String>),
}

/// The instance id `PROCESS/KEY#N`.
pub fn instance_id(process: &str, key: &str, n: u64) -> String {
    crate::run::concat(&[process, "/", key, "#", itoa::Buffer::new().format(n)])
}

/// The run target of step `step` of instance `PROCESS/KEY#N`:
/// `PROCESS/KEY#N.STEP`; its runs are `PROCESS/KEY#N.STEP#SEQ`.
pub fn step_target(instance: &str, step: u32) -> String {
    crate::run::concat(&[instance, ".", itoa::Buffer::new().format(step)])
}

/// The parts of a step run id `PROCESS/KEY#N.STEP#SEQ`. Process names hold
/// no `/` or `#`; keys may hold anything, so the rest is split from the right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRunId<'a> {
    /// The process.
    pub process: &'a str,
    /// The key.
    pub key: &'a str,
    /// The instance number.
    pub n: u64,
    /// The step index.
    pub step: u32,
}

/// Splits a step run id; `None` when it is not one. Every result is split
/// three times on its way (router, run kind, process): each number is
/// found by a walk from the right over what a number may hold, which stops
/// where a search for its separator would have gone on.
pub fn parse_step_run_id(run_id: &str) -> Option<StepRunId<'_>> {
    let slash = run_id.bytes().position(|b| b == b'/')?;
    let (process, rest) = (run_id.get(..slash)?, run_id.get(slash + 1..)?);
    let (target, seq) = number_after_last(rest, b'#')?;
    seq.parse::<u64>().ok()?;
    let (instance, step) = number_after_last(target, b'.')?;
    let (key, n) = number_after_last(instance, b'#')?;
    Some(StepRunId {
        process,
        key,
        n: n.parse().ok()?,
        step: step.parse().ok()?,
    })
}

/// `text` split at its last `sep` when only what a number may hold (digits
/// and a sign) follows it: as `rsplit_once` where the part after would be
/// a number, and `None` where it could not be one.
fn number_after_last(text: &str, sep: u8) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let at = bytes
        .iter()
        .rposition(|&b| !(b.is_ascii_digit() || b == b'+'))?;
    if bytes.get(at) != Some(&sep) {
        return None;
    }
    Some((text.get(..at)?, text.get(at + 1..)?))
}

/// The JSON a `when` predicate sees as `last`: the previous instance's
/// outcome, `null` when there is none.
pub fn last_json(process: &str, key: &str, last: Option<&Outcome>) -> serde_json::Value {
    let Some(last) = last else {
        return serde_json::Value::Null;
    };
    let mut m = serde_json::Map::new();
    m.insert("instance".into(), instance_id(process, key, last.n).into());
    m.insert("status".into(), last.status.as_str().into());
    m.insert("finished_at".into(), last.finished_at.to_string().into());
    m.insert(
        "context".into(),
        serde_json::Value::Object(last.context.clone()),
    );
    if let Some(error) = &last.error {
        m.insert("error".into(), error.clone().into());
    }
    serde_json::Value::Object(m)
}

/// The JSON a `when` predicate sees as `context`: the key's through
/// context — active instance, waiting launches, goal.
pub fn context_json(process: &str, key: &str, record: &KeyRecord) -> serde_json::Value {
    let mut m = BTreeMap::new();
    m.insert("goal", serde_json::Value::from(record.goal));
    m.insert(
        "active",
        record.active.as_ref().map_or(serde_json::Value::Null, |i| {
            instance_id(process, key, i.n).into()
        }),
    );
    m.insert("waiting", serde_json::Value::from(record.waiting.len()));
    serde_json::to_value(m).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_run_ids_round_trip_with_any_key() {
        for key in ["u1", "a/b#3.4", "#", ".", "k.1#2"] {
            let instance = instance_id("payout", key, 12);
            let run = crate::run::run_id(&step_target(&instance, 3), 7);
            assert_eq!(
                parse_step_run_id(&run),
                Some(StepRunId {
                    process: "payout",
                    key,
                    n: 12,
                    step: 3
                }),
                "{run}"
            );
        }
        assert_eq!(parse_step_run_id("price/o1#3"), None);
        assert_eq!(parse_step_run_id("orders#3"), None);
        assert_eq!(parse_step_run_id("p/k#x.1#2"), None);
    }

    /// The splitting by searches the walk from the right replaced.
    fn split_by_searches(run_id: &str) -> Option<StepRunId<'_>> {
        let (process, rest) = run_id.split_once('/')?;
        let (target, seq) = rest.rsplit_once('#')?;
        seq.parse::<u64>().ok()?;
        let (instance, step) = target.rsplit_once('.')?;
        let (key, n) = instance.rsplit_once('#')?;
        Some(StepRunId {
            process,
            key,
            n: n.parse().ok()?,
            step: step.parse().ok()?,
        })
    }

    proptest::proptest! {
        /// Any text splits as the searches split it: separators anywhere,
        /// signs, numbers too large, text that is not ASCII.
        #[test]
        fn a_step_run_id_splits_as_by_searches(
            noise in "[ab/#.+\\-0-9é]{0,24}",
            (process, key) in ("[a-z]{1,3}", "[a-z#./+0-9é]{0,4}"),
            numbers in proptest::collection::vec("\\+?[0-9]{1,21}|[+\\-0-9a]{0,3}", 3),
        ) {
            let id = format!("{process}/{key}#{}.{}#{}", numbers[0], numbers[1], numbers[2]);
            for run_id in [noise.as_str(), id.as_str()] {
                proptest::prop_assert_eq!(parse_step_run_id(run_id), split_by_searches(run_id));
            }
        }
    }
}
