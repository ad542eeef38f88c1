//! Reactor turns change streams into work.
//!
//! # Layout
//!
//! - [`duration`]: typed, human-written durations (`45s`, `30min`, `2h`, `2d`).
//! - [`ctl`]: CTL parameters, time scales and chunk counting in a time zone.
//! - [`trigger`]: the trigger DSL, its evaluation, `explain` and lint.

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
