//! THE shard driver: how one shard's engine is driven, whoever drives it —
//! `reactor simulate` and the golden scenarios, the poison and mock-cluster
//! tests, and the Kafka runtime. An input goes through the core and its
//! actions go to a [`Sink`] (Kafka records and the changelog in the
//! runtime, JSON lines and an in-memory changelog in the simulator), with
//! the same metrics, the same validation of what an input may make the
//! outputs carry, and the same timer semantics:
//!
//! - every timer fires at its own deadline, in deadline order: before an
//!   input at `now`, the shard is advanced to `now`, each due deadline `d`
//!   firing as `tick(d)` (a timer due between two inputs is decided at its
//!   time, not at the next input's);
//! - after an input, the shard is advanced to `now` again, so work the
//!   input scheduled for now (a rescan's next chunk) happens now;
//! - a restored shard is started at the restore's `now`, which fires
//!   whatever fell due while nobody owned it, once.
//!
//! A scenario that passes in `simulate` therefore means the same decisions,
//! at the same times, in production.

use jiff::Timestamp;

use crate::action::Action;
use crate::changelog::ChangelogRecord;
use crate::codec::{limits, DecodeError};
use crate::config::Config;
use crate::ctl::ParamId;
use crate::engine::{self, parse_stage_run_id, Engine, Input, Update};
use crate::metrics;
use crate::offer::{Change, OfferChange};
use crate::router::Router;

/// Where a shard's decisions go.
pub trait Sink {
    /// Takes the actions the engine decided at `at`, in order, leaving
    /// the list empty (the engine fills it again).
    fn take(&mut self, at: Timestamp, actions: &mut Vec<Action>);
}

/// A sink that keeps everything, with its time (tests, tools).
impl Sink for Vec<(Timestamp, Action)> {
    fn take(&mut self, at: Timestamp, actions: &mut Vec<Action>) {
        self.extend(actions.drain(..).map(|a| (at, a)));
    }
}

/// Why an input was not applied.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// It would make the outputs carry more than they may (an offer body
    /// over [`limits::MAX_BODY_BYTES`]): refused, the shard untouched.
    #[error("{0}")]
    Invalid(#[from] DecodeError),
    /// The engine broke an invariant on it (a bug): its decisions are
    /// dropped and the shard's state may hold part of the step, so the
    /// shard must be rebuilt from its changelog.
    #[error("{0}")]
    Broke(#[from] engine::Error),
}

/// One shard's engine and what drives it (see the module docs).
pub struct Driver {
    partition: i32,
    engine: Engine,
    metrics: metrics::Handles,
}

impl Driver {
    /// Drives `engine` as shard `partition` (not started: see
    /// [`Driver::start`]).
    pub fn new(partition: i32, engine: Engine) -> Driver {
        Driver {
            partition,
            engine,
            metrics: metrics::Handles::new(),
        }
    }

    /// Rebuilds shard `partition` of `router` from its changelog `records`
    /// (in order; last write wins) with the global CTL table `ctl`, as a new
    /// owner does. Start it with [`Driver::start`].
    pub fn restore(
        config: &Config,
        router: &Router,
        partition: i32,
        records: impl IntoIterator<Item = ChangelogRecord>,
        ctl: impl IntoIterator<Item = (ParamId, Timestamp)>,
    ) -> Result<Driver, engine::Error> {
        let mut engine = Driver::empty_shard(config, router, partition)?;
        for record in records {
            engine.restore_record(record, None)?;
        }
        Driver::restored(router, partition, engine, ctl)
    }

    /// Shard `partition` of `router` with nothing restored yet: take its
    /// changelog records with [`Engine::restore_record`] as they are read,
    /// then hand it to [`Driver::restored`].
    pub fn empty_shard(
        config: &Config,
        router: &Router,
        partition: i32,
    ) -> Result<Engine, engine::Error> {
        // The router's parameter ids and pool partitions are read as
        // `config`'s: from another configuration they would name other
        // parameters and place other pools, silently.
        if !router.is_of(config) {
            return Err(engine::bug(
                "a shard restored with a router built from another configuration",
            ));
        }
        Ok(Engine::for_shard(config, |pool| {
            router.pool(pool) == partition
        }))
    }

    /// Drives `engine`, shard `partition` of `router` whose changelog
    /// records it has taken, with the global CTL table `ctl`.
    pub fn restored(
        router: &Router,
        partition: i32,
        mut engine: Engine,
        ctl: impl IntoIterator<Item = (ParamId, Timestamp)>,
    ) -> Result<Driver, engine::Error> {
        engine.restored()?;
        // Each stage's and job's limits are split over the partitions: set
        // before `start`, which dispatches.
        engine.set_partition(
            u32::try_from(partition).unwrap_or_default(),
            u32::try_from(router.partitions()).unwrap_or(1),
        );
        let mut driver = Driver::new(partition, engine);
        driver.load_ctl(ctl);
        Ok(driver)
    }

    /// Loads CTL values without evaluating anything (the global table, into
    /// a restored or resumed shard, before [`Driver::start`]).
    /// Values are given by the router's parameter ids ([`Router::ctl`]).
    pub fn load_ctl(&mut self, table: impl IntoIterator<Item = (ParamId, Timestamp)>) {
        for (named, value) in table {
            self.engine.load_named_ctl(named, value);
        }
    }

    /// The shard's partition.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The shard's engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Starts the shard at `now`: a fresh shard arms its timers, a restored
    /// one fires what fell due while nobody owned it.
    pub fn start(&mut self, now: Timestamp, sink: &mut dyn Sink) -> Result<(), engine::Error> {
        let actions = self.engine.start(now)?;
        self.emit(now, actions, sink);
        Ok(())
    }

    /// Fires every timer due at or before `until`, each at its own deadline.
    pub fn advance(&mut self, until: Timestamp, sink: &mut dyn Sink) -> Result<(), engine::Error> {
        while let Some(at) = self.engine.next_deadline().filter(|at| *at <= until) {
            let actions = self.engine.tick(at)?;
            self.emit(at, actions, sink);
        }
        Ok(())
    }

    /// Applies `input` at `now` (timers due before it fire first, at their
    /// deadlines). `caused_at` is when the input was produced, for the
    /// dispatch latency metric.
    pub fn apply(
        &mut self,
        input: Input,
        now: Timestamp,
        caused_at: Option<Timestamp>,
        sink: &mut dyn Sink,
    ) -> Result<(), Refused> {
        self.advance(now, sink)?;
        bound_body(&mut self.engine, &input)?;
        let success = match &input {
            Input::Result(r) if r.status == crate::run::Status::Succeeded => {
                // Inline up to 24 bytes: a copy, not an allocation.
                let run_id = crate::name_map::Name::from(r.run_id.as_str());
                Some((self.engine.run_kind(&r.run_id), run_id, r.pass))
            }
            _ => None,
        };
        let actions = self.engine.apply(input, now)?;
        if let Some((kind, run_id, pass)) = success {
            metrics::record_success(&mut self.metrics, kind, &run_id, pass, &actions);
        }
        if let Some(at) = caused_at {
            metrics::record_dispatch_latency(&self.metrics, &actions, at, now);
        }
        self.emit(now, actions, sink);
        // Work the input scheduled for now (a rescan's next chunks) happens now.
        self.advance(now, sink)?;
        Ok(())
    }

    /// Applies a CTL change at `now`: `value` of the parameter the router
    /// knows as `named` ([`Router::ctl`]; a change of a parameter no task
    /// names decides nothing and is not applied).
    pub fn apply_ctl(
        &mut self,
        value: Timestamp,
        named: ParamId,
        now: Timestamp,
        caused_at: Option<Timestamp>,
        sink: &mut dyn Sink,
    ) -> Result<(), engine::Error> {
        self.advance(now, sink)?;
        let actions = self.engine.apply_named_ctl(named, value, now)?;
        if !actions.is_empty() {
            if let Some(at) = caused_at {
                metrics::record_dispatch_latency(&self.metrics, &actions, at, now);
            }
        }
        self.emit(now, actions, sink);
        self.advance(now, sink)
    }

    fn emit(&mut self, at: Timestamp, mut actions: Vec<Action>, sink: &mut dyn Sink) {
        if !actions.is_empty() {
            metrics::record_actions(&mut self.metrics, self.partition, &actions);
            sink.take(at, &mut actions);
        }
        self.engine.recycle(actions);
    }
}

/// Refuses a patch (an offer change's, or a stage update's) that would make
/// the offer's body larger than [`limits::MAX_BODY_BYTES`]: every output
/// about the offer carries its body.
fn bound_body(engine: &mut Engine, input: &Input) -> Result<(), DecodeError> {
    let (id, patch, field) = match input {
        Input::Offer(OfferChange {
            offer_id,
            change: Change::Patch(patch),
            ..
        }) => (offer_id.as_str(), patch, "patch"),
        Input::Result(r) => match (&r.stage.update, parse_stage_run_id(&r.run_id)) {
            (Some(Update::Patch(patch)), Some((_, id))) => (id, patch, "update"),
            _ => return Ok(()),
        },
        _ => return Ok(()),
    };
    // A new offer starts from `{}`: the patch alone was checked. (A kept
    // body that does not read back fails the step itself, as a broken
    // invariant.)
    let Ok(Some(body)) = engine.offer_body(id) else {
        return Ok(());
    };
    // Each member of the merge comes from one of the two, merged objects
    // included: it is no larger than both together and no deeper than the
    // deeper. Only a pair over that bound is merged to be measured.
    if limits::object_size(&body) + limits::object_size(patch) <= limits::MAX_BODY_BYTES
        && limits::object_depth(&body).max(limits::object_depth(patch)) <= limits::MAX_JSON_DEPTH
    {
        return Ok(());
    }
    let body = crate::offer::patched(&body, patch);
    limits::check_object(field, &body, limits::MAX_BODY_BYTES).map_err(|e| match e {
        DecodeError::FieldTooLarge { size, limit, .. } => DecodeError::InvalidField {
            field,
            reason: format!(
                "the offer's body would be {size} bytes with it, over the limit of {limit}"
            ),
        },
        other => other,
    })
}
// Shards are restored on a thread of their own and handed to the runtime's.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<Driver>();
};

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[[pool]]
name = "p"
max_running = 1

[[task]]
id = "t"
pool = "p"
trigger = "delta(dwh.orders/max_dt, 1h)"
"#;

    #[test]
    fn a_shard_is_restored_only_with_the_router_of_its_configuration() {
        let config = crate::config::parse(CONFIG, "driver.toml").unwrap().config;
        let router = Router::new(&config, 4);
        let restored = Driver::restore(&config, &router, 0, Vec::new(), Vec::new());
        assert!(restored.is_ok());

        // Read again from the same text: equal, but not the router's.
        let other = crate::config::parse(CONFIG, "driver.toml").unwrap().config;
        let refused = Driver::restore(&other, &router, 0, Vec::new(), Vec::new());
        assert!(matches!(
            refused.err(),
            Some(engine::Error::Invariant(m)) if m.contains("another configuration")
        ));
    }
}
