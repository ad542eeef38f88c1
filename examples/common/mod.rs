//! What the probes share: the configuration `reactor bench` measures, their
//! arguments, and fresh shards (each probe uses a part of it).

use std::fmt::Write;

/// `tasks` tasks as `reactor bench` configures them: task `t{i}` fires on
/// `bench.t{i}/max_dt`, the tasks spread over 16 pools.
#[allow(dead_code)]
pub fn bench_tasks_toml(tasks: usize) -> String {
    let mut text = String::new();
    for p in 0..16 {
        let _ = writeln!(text, "[[pool]]\nname = \"p{p}\"\n");
    }
    for i in 0..tasks {
        let _ = writeln!(
            text,
            "[[task]]\nid = \"t{i}\"\npool = \"p{}\"\ntrigger = \"delta(bench.t{i}/max_dt, 1min)\"\ntimeout = \"1h\"\n",
            i % 16
        );
    }
    text
}

/// The probe's arguments, each a count (items, shards …).
#[allow(dead_code)]
pub fn counts() -> impl Iterator<Item = usize> {
    std::env::args().skip(1).map(|a| {
        a.parse()
            .unwrap_or_else(|_| panic!("`{a}` is not a count: the arguments are counts"))
    })
}

/// Every shard of `router` as a new owner starts it, with an empty
/// changelog, at `now`.
#[allow(dead_code)]
pub fn fresh_shards(
    config: &reactor::config::Config,
    router: &reactor::router::Router,
    now: jiff::Timestamp,
) -> Vec<reactor::shell::driver::Driver> {
    (0..router.partitions())
        .map(|p| {
            let mut d = reactor::shell::driver::Driver::restore(
                config,
                router,
                p,
                std::iter::empty(),
                std::iter::empty(),
            )
            .unwrap();
            d.start(now, &mut Vec::new()).unwrap();
            d
        })
        .collect()
}

/// What a probe's measured part keeps between records: the runtime's
/// encoder and the outputs of the last step.
#[allow(dead_code)]
pub struct Path {
    settings: reactor::config::KafkaSettings,
    names: reactor::runtime::output::OutTopics,
    encoded: reactor::runtime::output::OutRecords,
    /// The actions of the last step, not yet encoded.
    pub out: Vec<(jiff::Timestamp, reactor::action::Action)>,
    /// Records encoded so far.
    pub records: usize,
}

#[allow(dead_code)]
impl Path {
    pub fn new() -> Path {
        let settings = reactor::config::KafkaSettings::default();
        Path {
            names: reactor::runtime::output::OutTopics::new(&settings.topics),
            settings,
            encoded: Default::default(),
            out: Vec::new(),
            records: 0,
        }
    }
}

/// A record as a probe hands it to [`take`]: the role of its topic, its
/// key and its payload.
#[allow(dead_code)]
pub type Record<'a> = (reactor::runtime::intake::Role, Option<&'a [u8]>, &'a [u8]);

/// The runtime thread's part of a probe (`--toggle-collect='*common::take'`
/// profiles it alone): the outputs of the step before encoded as the
/// runtime encodes them, then `record` (role, key, payload) decoded as the
/// runtime decodes it and applied to `shard`.
#[inline(never)]
#[allow(dead_code)]
pub fn take(
    path: &mut Path,
    shard: &mut reactor::shell::driver::Driver,
    partition: i32,
    record: Option<Record<'_>>,
    now: jiff::Timestamp,
) {
    reactor::runtime::output::encode(
        path.out.drain(..).map(|(_, a)| a),
        partition,
        &path.settings,
        &path.names,
        now,
        &mut path.encoded,
    );
    path.records += path.encoded.len();
    path.encoded.clear();
    if let Some((role, key, payload)) = record {
        let input = reactor::runtime::intake::decode(role, key, Some(payload)).unwrap();
        shard.apply(input, now, None, &mut path.out).unwrap();
    }
}
