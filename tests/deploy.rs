//! The files in `deploy/` name only metrics Reactor exports: every metric in
//! every alert expression (`deploy/alerts.yaml`) and every dashboard query
//! (`deploy/grafana-dashboard.json`) must be in the table of
//! `src/metrics.rs`, as registered by [`reactor::metrics::describe`].
//! `promtool` checks the PromQL itself (`.ci/ecosystem`); this test needs
//! nothing but the repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use yaml_rust2::{Yaml, YamlLoader};

/// Metrics that Prometheus adds itself, allowed in expressions.
const PROMETHEUS_METRICS: [&str; 1] = ["up"];

/// Suffixes of the series a histogram is scraped as.
const HISTOGRAM_SUFFIXES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// PromQL words that look like identifiers but name no metric: operators,
/// modifiers and aggregations (which may be followed by `by (…)` rather
/// than by their parenthesis).
const KEYWORDS: [&str; 25] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "nan",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Type {
    Counter,
    Gauge,
    Histogram,
}

/// A recorder that keeps the name and type of every described metric.
#[derive(Default)]
struct Table(Mutex<BTreeMap<String, Type>>);

impl Table {
    fn add(&self, key: KeyName, kind: Type) {
        self.0
            .lock()
            .unwrap()
            .insert(key.as_str().to_string(), kind);
    }
}

impl Recorder for Table {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, _: SharedString) {
        self.add(key, Type::Counter);
    }
    fn describe_gauge(&self, key: KeyName, _: Option<Unit>, _: SharedString) {
        self.add(key, Type::Gauge);
    }
    fn describe_histogram(&self, key: KeyName, _: Option<Unit>, _: SharedString) {
        self.add(key, Type::Histogram);
    }
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// The metrics table of `src/metrics.rs`: name → type.
fn table() -> BTreeMap<String, Type> {
    let table = Table::default();
    metrics::with_local_recorder(&table, reactor::metrics::describe);
    table.0.into_inner().unwrap()
}

/// Whether the scraped series `name` exists: a described metric, one of a
/// histogram's series, or Prometheus's own.
fn exists(table: &BTreeMap<String, Type>, name: &str) -> bool {
    if PROMETHEUS_METRICS.contains(&name) || table.contains_key(name) {
        return true;
    }
    HISTOGRAM_SUFFIXES.iter().any(|suffix| {
        name.strip_suffix(suffix)
            .is_some_and(|base| table.get(base) == Some(&Type::Histogram))
    })
}

/// Drops the text between `open` and its matching `close`, keeping the
/// brackets: label matchers `{…}` and ranges `[…]` name no metric.
fn blank(expr: &str, open: char, close: char) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in expr.chars() {
        if c == open {
            depth += 1;
            if depth == 1 {
                out.push(c);
            }
        } else if c == close && depth > 0 {
            depth -= 1;
            if depth == 0 {
                out.push(c);
            }
        } else if depth == 0 {
            out.push(c);
        }
    }
    out
}

/// The metric names a PromQL expression reads.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // String literals (in label matchers and label_replace) first, then
    // matchers and ranges.
    let mut no_strings = String::new();
    let mut quote = None;
    for c in expr.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' || c == '`' => quote = Some(c),
            None => no_strings.push(c),
        }
    }
    let text = blank(&blank(&no_strings, '{', '}'), '[', ']');
    let chars: Vec<char> = text.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Inside `by (…)`, `without (…)`, `on (…)` …: label names.
    let mut in_labels = false;
    let mut last_word = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            let is_function = next == Some(&'(');
            let keyword = KEYWORDS.contains(&word.to_ascii_lowercase().as_str());
            if !in_labels && !is_function && !keyword {
                names.insert(word.clone());
            }
            last_word = word;
            continue;
        }
        if c.is_ascii_digit() || c == '.' {
            // A number, a duration (`5m`) or an exponent: skip it whole.
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if c == '(' {
            let grouping = [
                "by",
                "without",
                "on",
                "ignoring",
                "group_left",
                "group_right",
            ];
            in_labels = grouping.contains(&last_word.to_ascii_lowercase().as_str());
        } else if c == ')' {
            in_labels = false;
        }
        if !c.is_whitespace() {
            last_word.clear();
        }
        i += 1;
    }
    names
}

fn read(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Every `(rule name, expr)` of a Prometheus rules file.
fn rule_exprs(text: &str) -> Vec<(String, String)> {
    let docs = YamlLoader::load_from_str(text).expect("alerts.yaml is YAML");
    let doc = &docs[0];
    let groups = doc["groups"].as_vec().expect("a `groups` list");
    let mut exprs = Vec::new();
    for group in groups {
        for rule in group["rules"].as_vec().expect("a group has `rules`") {
            let name = match (&rule["alert"], &rule["record"]) {
                (Yaml::String(a), _) | (_, Yaml::String(a)) => a.clone(),
                _ => panic!("a rule without `alert` or `record`: {rule:?}"),
            };
            let expr = match &rule["expr"] {
                Yaml::String(e) => e.clone(),
                other => panic!("{name}: `expr` is not a string: {other:?}"),
            };
            exprs.push((name, expr));
        }
    }
    exprs
}

/// Every `expr` of a Grafana dashboard's panel targets.
fn dashboard_exprs(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => dashboard_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| dashboard_exprs(v, out)),
        _ => {}
    }
}

#[test]
fn the_scanner_finds_metric_names_only() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum without (instance, pod) (rate(reactor_dispatch_latency_seconds_bucket{kind="task", le=~"1|2"}[10m]))) > 30
           and on (kind) reactor_nope_total offset 5m or label_replace(up, "x", "$1", "job", "(.*)") > 1e3"#,
    );
    let expected: BTreeSet<String> = [
        "reactor_dispatch_latency_seconds_bucket",
        "reactor_nope_total",
        "up",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names, expected);
    let table = table();
    assert!(exists(&table, "reactor_dispatch_latency_seconds_bucket"));
    assert!(exists(&table, "reactor_ready"));
    assert!(!exists(&table, "reactor_nope_total"));
    // Only histograms have a `_bucket` series.
    assert!(!exists(&table, "reactor_ready_bucket"));
}

#[test]
fn alerts_use_exported_metrics() {
    let table = table();
    let rules = rule_exprs(&read("deploy/alerts.yaml"));
    assert!(rules.len() >= 7, "the alerts of issue 13: {rules:?}");
    let mut missing = Vec::new();
    let mut used = BTreeSet::new();
    for (name, expr) in &rules {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{name}: no metric in `{expr}`");
        for metric in names {
            if !exists(&table, &metric) {
                missing.push(format!("{name}: {metric}"));
            }
            used.insert(metric);
        }
    }
    assert!(
        missing.is_empty(),
        "not in src/metrics.rs: {missing:#?}\nknown: {:#?}",
        table.keys()
    );
    // The issue's list: readiness, lag, dead letters, timeouts, dead runs,
    // aborts, no success.
    for metric in [
        "reactor_ready",
        "reactor_dispatch_latency_seconds_bucket",
        "reactor_dead_letters_total",
        "reactor_runs_timed_out_total",
        "reactor_runs_failed_total",
        "reactor_transactions_aborted_total",
        "reactor_task_seconds_since_success",
    ] {
        assert!(used.contains(metric), "no alert on {metric}");
    }
}

#[test]
fn dashboard_uses_exported_metrics() {
    let table = table();
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana-dashboard.json")).expect("dashboard JSON");
    let mut exprs = Vec::new();
    dashboard_exprs(&dashboard, &mut exprs);
    assert!(!exprs.is_empty(), "no panel queries found");
    let missing: Vec<String> = exprs
        .iter()
        .flat_map(|e| metric_names(e).into_iter().map(move |m| (e, m)))
        .filter(|(_, m)| !exists(&table, m))
        .map(|(e, m)| format!("{m} in `{e}`"))
        .collect();
    assert!(missing.is_empty(), "not in src/metrics.rs: {missing:#?}");
}
