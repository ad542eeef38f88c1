//! `reactor launch` and `reactor submit`: launch a process for keys (from
//! the command line or a keys file, streamed), or submit a job for a key,
//! as commands on `topics.commands`. Each command goes straight to the
//! partition that owns its keys (murmur2, as the router says), so no shard
//! has to forward it; the shard that owns a key checks `conflict`, `reuse`
//! and `when` and answers refusals as `launch_rejected` events.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use super::tools::{partition_count, settings, usage, FormatArg, Target};
use crate::codec;
use crate::engine::Command;
use crate::offer::Body;
use crate::process::Position;

/// Keys per launch command: a keys file becomes commands of at most this
/// many keys per partition, sent as the file is read.
pub const KEYS_PER_COMMAND: usize = 1000;

/// `reactor launch PROCESS KEY...`.
#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// The process (or, with --task, the task to run now).
    process: String,
    /// Business keys; with --keys-file, more come from the file.
    keys: Vec<String>,
    /// A file with one key per line (blank lines and `#` comments skipped),
    /// read as it is sent: a million keys need no memory for the list
    /// (with --front, the keys of each partition are held until the end, so
    /// that the list keeps its order at the head of the queue).
    #[arg(long, value_name = "FILE")]
    keys_file: Option<PathBuf>,
    /// A launch parameter, `NAME=VALUE` (repeatable); VALUE is read as JSON
    /// when it is a JSON number, bool or null, else as a string.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Launch parameters as a JSON object (merged under --param).
    #[arg(long, value_name = "JSON")]
    params_json: Option<String>,
    /// Enter the job queue at the front (the latest front push runs first).
    #[arg(long)]
    front: bool,
    /// Clear each key's goal first (`reuse = "until_reset"`).
    #[arg(long)]
    reset: bool,
    /// Run the task PROCESS now instead (string parameters only; no keys).
    #[arg(long)]
    task: bool,
    #[command(flatten)]
    target: Target,
    /// Encoding of the commands.
    #[arg(long, value_enum, default_value = "protobuf")]
    format: FormatArg,
}

/// `reactor submit JOB KEY`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The job.
    job: String,
    /// The business key: a key's jobs run one at a time, in queue order.
    key: String,
    /// A parameter, `NAME=VALUE` (repeatable), as for `launch`.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Parameters as a JSON object (merged under --param).
    #[arg(long, value_name = "JSON")]
    params_json: Option<String>,
    /// Enter the job queue (and the key's waiting jobs) at the front.
    #[arg(long)]
    front: bool,
    /// Queue priority (higher first; default 0).
    #[arg(long)]
    priority: Option<i64>,
    #[command(flatten)]
    target: Target,
    /// Encoding of the command.
    #[arg(long, value_enum, default_value = "protobuf")]
    format: FormatArg,
}

/// The parameters of `--param NAME=VALUE ...` over `--params-json`.
fn parameters(pairs: &[String], json: Option<&str>) -> Result<Body, String> {
    let mut params = match json {
        None => Body::new(),
        Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => return Err("--params-json: not a JSON object".to_string()),
            Err(e) => return Err(format!("--params-json: {e}")),
        },
    };
    for pair in pairs {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!("--param `{pair}`: write NAME=VALUE"));
        };
        if name.is_empty() {
            return Err(format!("--param `{pair}`: the name is empty"));
        }
        let value = match serde_json::from_str::<serde_json::Value>(value) {
            Ok(
                v @ (serde_json::Value::Number(_)
                | serde_json::Value::Bool(_)
                | serde_json::Value::Null),
            ) => v,
            _ => serde_json::Value::String(value.to_string()),
        };
        params.insert(name.to_string(), value);
    }
    crate::offer::normalize_body(&mut params);
    Ok(params)
}

/// The keys of the command line, then of the file, as they are read.
fn keys(
    args: &LaunchArgs,
) -> Result<Box<dyn Iterator<Item = Result<String, String>> + '_>, String> {
    let listed = args.keys.iter().cloned().map(Ok);
    let Some(path) = &args.keys_file else {
        return Ok(Box::new(listed));
    };
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let name = path.display().to_string();
    let lines = std::io::BufReader::new(file)
        .lines()
        .enumerate()
        .filter_map(move |(n, line)| match line {
            Err(e) => Some(Err(format!("{name}:{}: {e}", n + 1))),
            Ok(line) => {
                let key = line.trim();
                (!key.is_empty() && !key.starts_with('#')).then(|| Ok(key.to_string()))
            }
        });
    Ok(Box::new(listed.chain(lines)))
}

/// `reactor launch`: commands of at most [`KEYS_PER_COMMAND`] keys, each to
/// the partition owning its keys, in list order per partition.
pub fn launch(args: LaunchArgs) -> ExitCode {
    let conn = match settings(&args.target) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let params = match parameters(&args.params, args.params_json.as_deref()) {
        Ok(p) => p,
        Err(e) => return usage(&e),
    };
    if let Some(config) = &conn.config {
        let known = if args.task {
            config.tasks.iter().any(|t| t.id() == args.process)
        } else {
            config.processes.iter().any(|p| p.name == args.process)
                || config.jobs.iter().any(|j| j.name == args.process)
        };
        if !known {
            let what = if args.task { "task" } else { "process" };
            return usage(&format!(
                "no {what} `{}` in the configuration",
                args.process
            ));
        }
    }
    let topic = conn.kafka.topics.commands.clone();
    let format = args.format.into();
    let producer: ThreadedProducer<_> = match conn.clients().producer(None).create() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: creating a producer: {e}");
            return ExitCode::FAILURE;
        }
    };
    let send = |partition: Option<i32>, key: &str, command: &Command| {
        let payload = codec::encode_command(command, format);
        let mut record: BaseRecord<'_, str, [u8]> =
            BaseRecord::to(&topic).key(key).payload(&payload[..]);
        if let Some(p) = partition {
            record = record.partition(p);
        }
        crate::kafka::send_with_room(&producer, record, None, || {
            producer.poll(Duration::from_millis(10))
        })
        .map_err(|e| format!("producing to {topic}: {e}"))
    };
    if args.task {
        if !args.keys.is_empty() || args.keys_file.is_some() {
            return usage("--task runs a task now: it takes no keys");
        }
        let mut string_params = std::collections::BTreeMap::new();
        for (k, v) in params {
            let v = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            string_params.insert(k, v);
        }
        let command = Command::LaunchTask {
            task: args.process.clone(),
            params: string_params,
        };
        return finish(
            send(None, &args.process, &command),
            &producer,
            1,
            &args.process,
        );
    }
    let partitions = match partition_count(&conn.clients(), &topic) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let position = if args.front {
        Position::Front
    } else {
        Position::Back
    };
    let command = |keys: Vec<String>| Command::Launch {
        process: args.process.clone(),
        keys,
        params: params.clone(),
        position,
        reset: args.reset,
        source: Some("cli".to_string()),
    };
    let keys = match keys(&args) {
        Ok(k) => k,
        Err(e) => return usage(&e),
    };
    let mut batches: Vec<Vec<String>> = vec![Vec::new(); usize::try_from(partitions).unwrap_or(1)];
    // With --front the batches of a partition go out last first, so that
    // the whole list sits at the head of the queue in its own order.
    let mut held: Vec<(i32, Vec<String>)> = Vec::new();
    let (mut sent, mut total) = (0usize, 0usize);
    let mut flush = |p: i32, batch: Vec<String>, held: &mut Vec<(i32, Vec<String>)>| {
        if args.front {
            held.push((p, batch));
            return Ok(());
        }
        let key = batch.first().cloned().unwrap_or_default();
        sent += 1;
        send(Some(p), &key, &command(batch))
    };
    for key in keys {
        let key = match key {
            Ok(k) => k,
            Err(e) => return usage(&e),
        };
        if let Err(e) = crate::codec::validate::name("keys", key.clone()) {
            return usage(&format!("key `{key}`: {e}"));
        }
        total += 1;
        let p = crate::router::partition_for(key.as_bytes(), partitions);
        let Some(batch) = batches.get_mut(usize::try_from(p).unwrap_or(0)) else {
            continue;
        };
        batch.push(key);
        if batch.len() >= KEYS_PER_COMMAND {
            let full = std::mem::take(batch);
            if let Err(e) = flush(p, full, &mut held) {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    for (p, batch) in batches.into_iter().enumerate() {
        if !batch.is_empty() {
            if let Err(e) = flush(i32::try_from(p).unwrap_or(0), batch, &mut held) {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if total == 0 {
        return usage("no keys: give KEY... or --keys-file");
    }
    let mut result = Ok(());
    for (p, batch) in held.into_iter().rev() {
        let key = batch.first().cloned().unwrap_or_default();
        sent += 1;
        result = result.and_then(|()| send(Some(p), &key, &command(batch)));
    }
    let what = format!("{} for {total} keys", args.process);
    finish(result, &producer, sent, &what)
}

/// `reactor submit`: one command to the partition that owns the key.
pub fn submit(args: SubmitArgs) -> ExitCode {
    let conn = match settings(&args.target) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let params = match parameters(&args.params, args.params_json.as_deref()) {
        Ok(p) => p,
        Err(e) => return usage(&e),
    };
    if let Some(config) = &conn.config {
        if !config.jobs.iter().any(|j| j.name == args.job) {
            return usage(&format!("no job `{}` in the configuration", args.job));
        }
    }
    let topic = &conn.kafka.topics.commands;
    let command = Command::Submit {
        job: args.job.clone(),
        key: args.key.clone(),
        params,
        position: if args.front {
            Position::Front
        } else {
            Position::Back
        },
        priority: args.priority,
    };
    let payload = codec::encode_command(&command, args.format.into());
    let producer: ThreadedProducer<_> = match conn.clients().producer(None).create() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: creating a producer: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The Java-compatible partitioner puts it on the key's partition.
    let record: BaseRecord<'_, str, [u8]> = BaseRecord::to(topic)
        .key(args.key.as_str())
        .payload(&payload[..]);
    let sent = producer
        .send(record)
        .map_err(|(e, _)| format!("producing to {topic}: {e}"));
    finish(
        sent,
        &producer,
        1,
        &format!("{} for {}", args.job, args.key),
    )
}

fn finish(
    sent: Result<(), String>,
    producer: &ThreadedProducer<rdkafka::producer::DefaultProducerContext>,
    commands: usize,
    what: &str,
) -> ExitCode {
    let flushed = sent.and_then(|()| {
        producer
            .flush(Duration::from_secs(30))
            .map_err(|e| format!("flushing: {e}"))
    });
    match flushed {
        Ok(()) => {
            println!("{what}: {commands} command(s) sent; outcomes on the events topic");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_read_json_scalars_and_strings() {
        let p = parameters(
            &[
                "amount=5".into(),
                "to=x".into(),
                "ok=true".into(),
                "n=1.5".into(),
            ],
            Some(r#"{"amount": 1, "extra": [1]}"#),
        )
        .unwrap();
        assert_eq!(
            serde_json::Value::Object(p),
            serde_json::json!({"amount": 5, "to": "x", "ok": true, "n": 1.5, "extra": [1]})
        );
        assert!(parameters(&["bad".into()], None).is_err());
        assert!(parameters(&[], Some("[1]")).is_err());
    }
}
