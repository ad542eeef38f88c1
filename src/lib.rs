//! Reactor turns change streams into work: it watches data-freshness (CTL)
//! parameters, decides which tasks must run, dispatches and supervises the
//! runs, and records what each successful run saw.
//!
//! # Example
//!
//! The core is usable on its own: load a configuration, feed timed inputs,
//! read the decisions.
//!
//! ```
//! let config = reactor::config::parse(
//!     r#"
//!     [[task]]
//!     id = "orders_daily"
//!     trigger = "chunk_delta(dwh.orders/max_dt, day, 2)"
//!     "#,
//!     "example.toml",
//! )?
//! .config;
//! let input = r#"{"at": "2021-04-25T04:00:00Z", "ctl": {"entity": "dwh.orders", "param": "max_dt", "value": "2021-04-25T03:27:33Z"}}"#;
//! let (_, outputs) = reactor::sim::run(config, input, None, None, false)?;
//! let line = serde_json::to_value(&outputs[0])?;
//! assert_eq!(line["kind"], "run");
//! assert_eq!(line["run_id"], "orders_daily#1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! The core is pure (no I/O, no clock): `ctl`, `trigger`, `task`, `run` and
//! `engine` compute decisions; the rest drive it.
//!
//! - [`duration`]: human-written durations (`45s`, `30min`, `2h`, `2d`), one parser for DSL and config.
//! - [`ctl`]: CTL parameters, their names interned once for the configuration, a shard's table of current values, time scales and chunk counting.
//! - [`trigger`]: the trigger DSL: parsing with column errors, evaluation, `explain`, lint.
//! - [`config`]: the TOML configuration and its validation (errors name file, line, task, field).
//! - [`cron`]: five-field cron schedules and their next time in a zone (DST-correct).
//! - [`task`]: task states, the durable task record, pool queues.
//! - [`run`]: run ids, pass tokens, result matching, the retry policy.
//! - [`timers`]: deadlines ordered by `(deadline, key)`.
//! - [`stamp`]: a timestamp (and an optional one) in 12 bytes, for state kept per task and per parameter.
//! - [`ops`]: operations: search and recovery criteria (globs), modes, search rows, recovery records.
//! - [`engine`]: one shard's state machine, `apply(input, now) -> actions`, `tick`, `restore`.
//! - [`action`]: what the engine decides, as data: run commands, events, changelog records.
//! - [`changelog`]: changelog record types: the state a shard persists and restores from.
//! - [`keyed_map`]: records by string key found by hash and walked in key order (offers, process keys).
//! - [`name_index`]: positions in a list found by the names its items hold (tasks by id, without a copy of each id).
//! - `group_table`: a hash index of dense ids, a cache line per group, whose lookups can be fetched ahead (under `name_index` and the CTL names).
//! - [`name_map`]: a small map by name kept as a sorted list (parameter values, stage slots in records and commands).
//! - [`proto`]: types generated from `schemas/reactor.proto` (prost + proto3 JSON serde).
//! - [`codec`]: the wire format: decoding inputs and encoding outputs, protobuf or JSON.
//! - [`clock`]: injected time: the system clock, a manual clock for tests.
//! - [`kafka`]: the Kafka edge: client settings, topic checks and creation, murmur2 partitioning, reading a partition to its end.
//! - [`runtime`]: the shell: shards on Kafka, exactly-once batches, restore, rebalance, supervision.
//! - [`shell`]: the shard driver ([`shell::driver`]): input → core → actions → outputs, changelog and metrics, and timers, for the simulator, the tests and the runtime alike.
//! - [`service`]: one instance as a service: metrics, admin API, topic checks, supervised runtime, signals.
//! - [`sim`]: `reactor simulate`: the engine over timed JSON-lines inputs with a manual clock.
//! - [`cli`]: the command line of the product (`run`, `simulate`, `check`, `ctl set`, `tail`, …); the
//!   binary adds the tools `dev` and `bench`, which live outside this library (`src/dev`, `src/bench`).
//! - [`metrics`]: Prometheus metric names and descriptions, recording helpers, notable events that log and count.
//! - [`admin`]: the admin HTTP API: health, readiness, `/metrics`, task state and explain.

#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod action;
pub mod admin;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod changelog;
pub mod cli;
pub mod clock;
pub mod codec;
pub mod config;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod cron;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod ctl;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod duration;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod engine;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
mod group_table;
pub mod kafka;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod keyed_map;
pub mod metrics;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod name_index;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod name_map;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod offer;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod ops;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod process;
pub mod proto;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod router;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod run;
pub mod runtime;
pub mod service;
pub mod shell;
pub mod sim;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod stage;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod stamp;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod task;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod timers;
#[cfg_attr(
    not(test),
    deny(
        clippy::expect_used,
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable
    )
)]
pub mod trigger;
