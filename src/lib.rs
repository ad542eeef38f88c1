//! Reactor turns change streams into work: it watches data-freshness (CTL)
//! parameters, decides which tasks must run, dispatches and supervises the
//! runs, and records what each successful run saw.
//!
//! # Layout
//!
//! The core is pure (no I/O, no clock): `ctl`, `trigger`, `task`, `run` and
//! `engine` compute decisions; the rest drive it.
//!
//! - [`duration`]: human-written durations (`45s`, `30min`, `2h`, `2d`), one parser for DSL and config.
//! - [`ctl`]: CTL parameters, the interned table of current values, time scales and chunk counting.
//! - [`trigger`]: the trigger DSL: parsing with column errors, evaluation, `explain`, lint.
//! - [`config`]: the TOML configuration and its validation (errors name file, line, task, field).
//! - [`task`]: task states, the durable task record, pool queues.
//! - [`run`]: run ids, pass tokens, result matching, the retry policy.
//! - [`timers`]: deadlines ordered by `(deadline, key)`.
//! - [`engine`]: one shard's state machine, `apply(input, now) -> actions`, `tick`, `restore`.
//! - [`action`]: what the engine decides, as data: run commands, events, changelog records.
//! - [`changelog`]: changelog record types: the state a shard persists and restores from.
//! - [`sim`]: `reactor simulate`: the engine over timed JSON-lines inputs with a manual clock.
//! - [`cli`]: the command line (`simulate`, `check`).

pub mod action;
pub mod changelog;
pub mod cli;
pub mod config;
pub mod ctl;
pub mod duration;
pub mod engine;
pub mod run;
pub mod sim;
pub mod task;
pub mod timers;
pub mod trigger;
