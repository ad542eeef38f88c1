//! Golden scenarios: `tests/scenarios/NAME/{config.toml, input.jsonl,
//! expected.jsonl[, until]}` run through the same loop as `reactor simulate`,
//! straight through and again with the engine crashed and restored from its
//! changelog after every input in turn; every run must print exactly the
//! expected lines. `REACTOR_BLESS=1` writes the straight run's output as the
//! expected file (review it before committing); `REACTOR_BLESS=NAME` only
//! for the scenarios whose name contains NAME.

use std::path::{Path, PathBuf};

use reactor::sim;

fn scenarios() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/scenarios exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("input.jsonl").exists())
        .collect();
    dirs.sort();
    dirs
}

fn render(outputs: &[sim::Output]) -> Vec<String> {
    outputs
        .iter()
        .map(|o| serde_json::to_string(o).unwrap())
        .collect()
}

fn run(dir: &Path, crash_after: Option<usize>) -> Vec<String> {
    let config = reactor::config::load(&dir.join("config.toml"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .config;
    let input = std::fs::read_to_string(dir.join("input.jsonl")).unwrap();
    let until = std::fs::read_to_string(dir.join("until"))
        .ok()
        .map(|t| t.trim().parse().expect("until holds an RFC 3339 time"));
    let (_, out) = sim::run(config, &input, until, crash_after, false)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    render(&out)
}

fn expected(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("expected.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            // Normalise formatting so expected files may be written by hand.
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.to_string()
        })
        .collect()
}

fn normalise(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(&l)
                .unwrap()
                .to_string()
        })
        .collect()
}

fn diff(name: &str, how: &str, want: &[String], got: &[String]) -> Option<String> {
    // Compare as JSON values: key order and spacing in expected files are free.
    let parse = |v: &[String]| -> Vec<serde_json::Value> {
        v.iter().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    if parse(want) == parse(got) {
        return None;
    }
    let mut msg = format!("scenario {name} ({how}) differs:\n");
    for k in 0..want.len().max(got.len()) {
        let (w, g) = (want.get(k), got.get(k));
        if w != g {
            msg += &format!(
                "  line {}:\n    want {}\n    got  {}\n",
                k + 1,
                w.map_or("<none>", String::as_str),
                g.map_or("<none>", String::as_str)
            );
        }
    }
    Some(msg)
}

#[test]
fn golden_scenarios() {
    let dirs = scenarios();
    assert!(dirs.len() >= 8, "scenarios missing");
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let straight = normalise(run(dir, None));
        // `REACTOR_BLESS=1` blesses every scenario, `REACTOR_BLESS=job_` those
        // whose name contains `job_`.
        let bless =
            std::env::var("REACTOR_BLESS").is_ok_and(|b| b == "1" || name.contains(b.as_str()));
        if bless {
            std::fs::write(dir.join("expected.jsonl"), straight.join("\n") + "\n").unwrap();
        }
        let want = expected(dir);
        assert!(!want.is_empty(), "{name}: expected.jsonl is empty");
        failures.extend(diff(&name, "straight", &want, &straight));
        let input = std::fs::read_to_string(dir.join("input.jsonl")).unwrap();
        for k in 1..=sim::count_inputs(&input) {
            let crashed = normalise(run(dir, Some(k)));
            failures.extend(diff(
                &name,
                &format!("crash after input {k}"),
                &want,
                &crashed,
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
