//! The `reactor` binary as users run it: exit codes, messages, and
//! `simulate` printing exactly a golden scenario's expected lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/temp.rs"]
mod temp;
use temp::TempDir;

fn reactor(args: &[&str], stdin: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reactor"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    if let Some(path) = stdin {
        cmd.stdin(std::fs::File::open(path).unwrap());
    }
    cmd.output().unwrap()
}

/// A config file with `text` in a directory of its own (kept while the
/// directory is).
fn temp_config(name: &str, text: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(&format!("reactor-cli-{name}"));
    let path = dir.write("config.toml", text);
    (dir, path)
}

#[test]
fn simulate_reproduces_a_scenario_from_stdin() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/bounded_hold");
    let out = reactor(
        &["simulate", "-c", dir.join("config.toml").to_str().unwrap()],
        Some(&dir.join("input.jsonl")),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parse = |text: &str| -> Vec<serde_json::Value> {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let want = std::fs::read_to_string(dir.join("expected.jsonl")).unwrap();
    assert_eq!(parse(&String::from_utf8_lossy(&out.stdout)), parse(&want));
}

#[test]
fn invalid_config_exits_2_naming_file_line_task_and_field() {
    let (_dir, path) = temp_config(
        "bad",
        "[[task]]\nid = \"orders_daily\"\ntrigger = \"all(all(delta(a/b, 1h)))\"\n",
    );
    let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml:3: task `orders_daily`, field `trigger`"),
        "{err}"
    );
    assert!(err.contains("column 5"), "{err}");
}

#[test]
fn unknown_key_exits_2() {
    let (_dir, path) = temp_config(
        "unknown",
        "[[task]]\nid = \"a\"\ntrigger = \"delta(a/b, 1h)\"\nretries = 3\n",
    );
    let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 4") && err.contains("retries"), "{err}");
}

#[test]
fn lint_warns_on_stderr_and_runs() {
    let (_dir, path) = temp_config(
        "lint",
        "[[task]]\nid = \"fresh\"\ntrigger = \"delay(a/b, 1h)\"\n",
    );
    let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("warning: ") && err.contains("task `fresh`"),
        "{err}"
    );
}

#[test]
fn explain_prints_a_json_line_and_a_tree() {
    let out = reactor(
        &[
            "simulate",
            "-c",
            "examples/tasks.toml",
            "-i",
            "examples/ctl.jsonl",
            "--explain",
            "orders_daily",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "explain");
    assert_eq!(last["id"], "orders_daily");
    assert_eq!(last["explain"]["children"].as_array().unwrap().len(), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("chunk_delta(dwh.orders/max_dt, day)"));
}

#[test]
fn bad_input_line_is_an_error_naming_the_line() {
    let dir = TempDir::new("reactor-cli-input");
    let input = dir.join("in.jsonl");
    std::fs::write(
        &input,
        "{\"at\": \"2024-01-01T00:00:00Z\", \"ctl\": {\"entity\": \"a\"}}\n",
    )
    .unwrap();
    let out = reactor(
        &[
            "simulate",
            "-c",
            "examples/tasks.toml",
            "-i",
            input.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("input line 1"));
}

#[test]
fn stage_with_a_bad_when_exits_2_naming_stage_field_and_column() {
    let (_dir, path) = temp_config(
        "bad-when",
        "[[stage]]\nname = \"price\"\nwatch = [\"price\"]\nwhen = \"offer.price >\"\n",
    );
    let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml:4: stage `price`, field `when`: `offer.price >`: column "),
        "{err}"
    );
}

#[test]
fn stage_with_an_unknown_variable_exits_2_naming_the_column() {
    let (_dir, path) = temp_config(
        "unknown-variable",
        "[[stage]]\nname = \"expire\"\nwhen = \"offer.status == 'active'\"\n\
         timer = \"timestamp(ofer.published_at)\"\n",
    );
    let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "config.toml:4: stage `expire`, field `timer`: \
             `timestamp(ofer.published_at)`: column 11: unknown variable `ofer`"
        ),
        "{err}"
    );
}

#[test]
fn the_offers_example_runs_as_the_readme_shows() {
    let out = reactor(
        &[
            "simulate",
            "-c",
            "examples/offers.toml",
            "-i",
            "examples/offers.jsonl",
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The README's walk-through, line by line: (kind, stage or cause or event).
    let summary: Vec<String> = lines
        .iter()
        .map(|l| {
            let what = match l["kind"].as_str().unwrap() {
                "run" => l["run_id"].as_str().unwrap().to_string(),
                "offer_state" => format!("v{} {}", l["version"], l["cause"].as_str().unwrap()),
                _ => l["event"].as_str().unwrap().to_string(),
            };
            format!("{} {what}", l["at"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        summary,
        [
            "2024-06-01T10:00:00Z v1 external",
            "2024-06-01T10:00:00Z price/o1#1",
            "2024-06-01T10:00:10Z v2 external",
            "2024-06-01T10:00:20Z stale_version",
            "2024-06-01T10:00:20Z price/o1#1",
            "2024-06-01T10:00:25Z v3 stage:price",
            "2024-06-01T10:00:25Z badge/o1#1",
            "2024-06-01T10:00:30Z v4 stage:badge",
            "2024-06-01T10:05:00Z v5 command",
            "2024-06-01T10:05:00Z stage_state",
            "2024-06-01T10:10:00Z rescan_progress",
            "2024-06-01T10:10:00Z price/o1#2",
            "2024-11-28T10:00:00Z expire/o1#1",
            "2024-11-28T10:00:05Z v6 stage:expire",
        ]
    );
}

#[test]
fn the_processes_example_checks() {
    let out = reactor(&["check", "-c", "examples/processes.toml"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("3 jobs, 2 processes, 0 warnings"),
        "{stdout}"
    );
}

#[test]
fn process_with_an_unknown_step_exits_2_naming_process_field_and_line() {
    let (_dir, path) = temp_config(
        "bad-step",
        "[[job]]\nname = \"send_tx\"\n\n[[process]]\nname = \"payout\"\n\
         steps = [\"reserve\", \"send_tx\"]\n",
    );
    let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "config.toml:6: process `payout`, field `steps`: no job named `reserve`; \
             declare it in a [[job]] section"
        ),
        "{err}"
    );
}

#[test]
fn oversized_expressions_and_triggers_exit_2_naming_the_limit() {
    let whens = [
        format!("1{} > 0", "+1".repeat(10_000)),
        format!("1{} > 0", "+1".repeat(500)),
        format!("offer{} == 1", ".a".repeat(20_000)),
        format!("offer{} == 1", "['a']".repeat(50_000)),
        format!("{}true{}", "(".repeat(100), ")".repeat(100)),
    ];
    for (i, when) in whens.iter().enumerate() {
        let (_dir, path) = temp_config(
            &format!("long-when-{i}"),
            &format!("[[stage]]\nname = \"price\"\nwhen = \"{when}\"\n"),
        );
        let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("stage `price`, field `when`") && err.contains("expression too large"),
            "{}",
            &err[..err.len().min(300)]
        );
    }
    let trigger = format!("any({}delta(a/b, 1h))", "delta(a/b, 1h), ".repeat(2000));
    let (_dir, path) = temp_config(
        "long-trigger",
        &format!("[[task]]\nid = \"t\"\ntrigger = \"{trigger}\"\n"),
    );
    let out = reactor(&["check", "-c", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("trigger too large"),
        "{}",
        &err[..err.len().min(300)]
    );
}

#[test]
fn simulate_refuses_what_kafka_refuses_and_rejects_a_long_rescan() {
    let dir = TempDir::new("reactor-cli-refuse-inputs");
    let (_config_dir, config) = temp_config("refuse", "[[stage]]\nname = \"price\"\n");
    let run = |name: &str, lines: &str| {
        let input = dir.join(name);
        std::fs::write(&input, lines).unwrap();
        reactor(
            &[
                "simulate",
                "-c",
                config.to_str().unwrap(),
                "-i",
                input.to_str().unwrap(),
            ],
            None,
        )
    };
    let at = r#""at": "2024-06-01T00:00:00Z""#;
    for (line, reason) in [
        (
            format!(
                r#"{{{at}, "ctl": {{"entity": "", "param": "p", "value": "2024-06-01T00:00:00Z"}}}}"#
            ),
            "missing field `entity`",
        ),
        (
            format!(r#"{{{at}, "offer": {{"id": "", "body": {{"price": 1}}}}}}"#),
            "missing field `offer_id`",
        ),
    ] {
        let out = run("refused.jsonl", &line);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("input line 1") && err.contains(reason),
            "{err}"
        );
    }
    // A 3,000-term filter is a rejected command, and the simulation goes on.
    let rescan = format!(
        r#"{{{at}, "command": {{"op": "rescan", "stage": "price", "when": "1{} > 0"}}}}
{{{at}, "offer": {{"id": "o1", "body": {{"price": 1}}}}}}
"#,
        "+1".repeat(2999)
    );
    let out = run("rescan.jsonl", &rescan);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(
        (&first["kind"], &first["event"]),
        (
            &serde_json::json!("event"),
            &serde_json::json!("command_rejected")
        )
    );
    assert!(first["reason"]
        .as_str()
        .unwrap()
        .contains("expression too large"));
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(r#""kind":"offer_state""#)),
        "{stdout}"
    );
}
