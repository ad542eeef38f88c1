//! `RunCommand`: what Reactor sends to workers.

use jiff::Timestamp;

use prost::encoding::{btree_map, string};

use super::error::{non_empty, DecodeError};
use super::put::{put_str, put_ts, put_uint, str_len, ts_len, uint_len};
use super::structs::{
    body_from_struct, encode_with_json_into, json_from_value, optional_body, put_fields, JsonField,
};
use super::time::{
    proto_map, put_ts_map, required_ts, timestamp_to_proto, ts_map_room, TS_FIELD_ROOM,
};
use super::wire::{decode, encode_into, Format};
use crate::action::{RunCommand, StageRunCommand, StepRunCommand};
use crate::offer::Body;
use crate::proto::v1;

/// `RunCommand.kind` of a task run.
pub const KIND_TASK: &str = "task";

/// `RunCommand.kind` of a stage run.
pub const KIND_STAGE: &str = "stage";

/// `RunCommand.kind` of a process step (or a submitted job).
pub const KIND_STEP: &str = "step";

/// Encodes a step run command. The reply key is the business key, so that
/// the result reaches the partition that owns the key. Parameters and
/// context are written canonically.
pub fn encode_step_run_command(
    command: &StepRunCommand,
    reply_topic: &str,
    issued_at: Timestamp,
    format: Format,
) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_step_run_command_into(command, reply_topic, issued_at, format, &mut buf);
    buf
}

/// [`encode_step_run_command`], appended to `buf`.
pub fn encode_step_run_command_into(
    command: &StepRunCommand,
    reply_topic: &str,
    issued_at: Timestamp,
    format: Format,
    buf: &mut Vec<u8>,
) {
    let fields = step_json_fields(command);
    match format {
        // Written straight from the command, in the order prost writes the
        // message (its fields by tag, then args and context): a copy of
        // every string into the generated message first was most of the
        // cost of sending a step.
        Format::Protobuf => {
            let source = command.source.as_deref().unwrap_or_default();
            buf.reserve(
                str_len(1, &command.run_id)
                    + str_len(2, KIND_STEP)
                    + uint_len(4, command.attempt.into())
                    + uint_len(5, command.pass)
                    + ts_len(8, command.deadline)
                    + str_len(9, reply_topic)
                    + str_len(10, &command.key)
                    + ts_len(11, issued_at)
                    + str_len(30, &command.process)
                    + str_len(31, &command.key)
                    + str_len(32, &command.instance)
                    + uint_len(33, command.step.into())
                    + str_len(34, &command.job)
                    + str_len(RUN_SOURCE, source),
            );
            put_head(
                &Head {
                    run_id: &command.run_id,
                    kind: KIND_STEP,
                    attempt: command.attempt,
                    pass: command.pass,
                    deadline: command.deadline,
                    reply_topic,
                    reply_key: &command.key,
                    issued_at,
                },
                buf,
            );
            put_str(30, &command.process, buf);
            put_str(31, &command.key, buf);
            put_str(32, &command.instance, buf);
            put_uint(33, command.step.into(), buf);
            put_str(34, &command.job, buf);
            put_str(RUN_SOURCE, source, buf);
            put_fields(&fields, buf);
        }
        Format::Json => encode_with_json_into(
            &step_run_message(command, reply_topic, issued_at),
            &fields,
            format,
            buf,
        ),
    }
}

/// A step's args and context: JSON objects, written as `Struct`s after the
/// generated message.
fn step_json_fields(command: &StepRunCommand) -> [(u32, &'static str, JsonField<'_>); 2] {
    [
        (35, "args", JsonField::Struct(&command.params)),
        (36, "context", JsonField::Struct(&command.context)),
    ]
}

/// The generated message of a step's run command, without its args and
/// context (JSON fields, written beside it).
fn step_run_message(
    command: &StepRunCommand,
    reply_topic: &str,
    issued_at: Timestamp,
) -> v1::RunCommand {
    v1::RunCommand {
        run_id: command.run_id.as_str().to_owned(),
        kind: KIND_STEP.to_string(),
        attempt: command.attempt,
        pass: command.pass,
        deadline: Some(timestamp_to_proto(command.deadline)),
        reply_topic: reply_topic.to_string(),
        reply_key: command.key.clone(),
        issued_at: Some(timestamp_to_proto(issued_at)),
        process: command.process.clone(),
        key: command.key.clone(),
        instance: command.instance.clone(),
        step: command.step,
        job: command.job.to_string(),
        source: command.source.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// Decodes a step run command as a job worker sees it (protobuf or JSON).
/// `kind` must be `step`; absent `args` and `context` read as `{}`.
pub fn decode_step_run_command(bytes: &[u8]) -> Result<StepRunCommand, DecodeError> {
    let m: v1::RunCommand = decode(bytes)?;
    if m.kind != KIND_STEP {
        return Err(DecodeError::InvalidField {
            field: "kind",
            reason: format!("expected `{KIND_STEP}`, got `{}`", m.kind),
        });
    }
    let object = |field, s| optional_body(field, s).map(Option::unwrap_or_default);
    Ok(StepRunCommand {
        process: non_empty("process", m.process)?,
        key: non_empty("key", m.key)?,
        instance: non_empty("instance", m.instance)?,
        step: m.step,
        job: non_empty("job", m.job)?.into(),
        run_id: non_empty("run_id", m.run_id)?.into(),
        attempt: m.attempt,
        pass: m.pass,
        params: object("args", m.args)?,
        context: object("context", m.context)?,
        deadline: required_ts("deadline", m.deadline.as_ref())?,
        source: Some(m.source).filter(|s| !s.is_empty()),
        topic: "".into(),
    })
}

/// Encodes a run command with where to reply and when it was issued. In
/// protobuf its fields are written straight from the command, in field
/// order with the snapshot last (what prost writes for the message, then
/// [`put_ts_map`]): one is written for every run.
pub fn encode_run_command(
    command: &RunCommand,
    reply_topic: &str,
    reply_key: &str,
    issued_at: Timestamp,
    format: Format,
) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_run_command_into(command, reply_topic, reply_key, issued_at, format, &mut buf);
    buf
}

/// [`encode_run_command`], appended to `buf`.
pub fn encode_run_command_into(
    command: &RunCommand,
    reply_topic: &str,
    reply_key: &str,
    issued_at: Timestamp,
    format: Format,
    buf: &mut Vec<u8>,
) {
    let source = command.source.as_deref().unwrap_or_default();
    match format {
        Format::Protobuf => {
            buf.reserve(run_command_room(command, reply_topic, reply_key));
            put_str(1, &command.run_id, buf);
            put_str(2, KIND_TASK, buf);
            put_str(3, command.task(), buf);
            put_uint(4, command.attempt.into(), buf);
            put_uint(5, command.pass, buf);
            btree_map::encode(
                string::encode,
                string::encoded_len,
                string::encode,
                string::encoded_len,
                RUN_PARAMS,
                &command.params,
                buf,
            );
            put_ts(8, command.deadline, buf);
            put_str(9, reply_topic, buf);
            put_str(10, reply_key, buf);
            put_ts(11, issued_at, buf);
            put_str(RUN_SOURCE, source, buf);
            put_ts_map(RUN_SNAPSHOT, &command.snapshot, buf);
        }
        Format::Json => encode_into(
            &task_run_message(command, reply_topic, reply_key, issued_at),
            format,
            buf,
        ),
    }
}

/// Room for a task's run command, at least its length: the timestamps at
/// their most rather than measured (measuring one took nearly what writing
/// it does).
fn run_command_room(command: &RunCommand, reply_topic: &str, reply_key: &str) -> usize {
    let source = command.source.as_deref().unwrap_or_default();
    str_len(1, &command.run_id)
        + str_len(2, KIND_TASK)
        + str_len(3, command.task())
        + uint_len(4, command.attempt.into())
        + uint_len(5, command.pass)
        + btree_map::encoded_len(
            string::encoded_len,
            string::encoded_len,
            RUN_PARAMS,
            &command.params,
        )
        + 2 * TS_FIELD_ROOM
        + str_len(9, reply_topic)
        + str_len(10, reply_key)
        + str_len(RUN_SOURCE, source)
        + ts_map_room(&command.snapshot)
}

/// The generated message of a task's run command.
fn task_run_message(
    command: &RunCommand,
    reply_topic: &str,
    reply_key: &str,
    issued_at: Timestamp,
) -> v1::RunCommand {
    v1::RunCommand {
        run_id: command.run_id.as_str().to_owned(),
        kind: KIND_TASK.to_string(),
        task: command.task().to_string(),
        attempt: command.attempt,
        pass: command.pass,
        params: command.params.clone(),
        snapshot: proto_map(command.snapshot.clone()),
        deadline: Some(timestamp_to_proto(command.deadline)),
        reply_topic: reply_topic.to_string(),
        reply_key: reply_key.to_string(),
        issued_at: Some(timestamp_to_proto(issued_at)),
        source: command.source.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// The fields a stage's and a step's run command share, up to `issued_at`
/// (a task's interleaves its task name and parameters among them).
struct Head<'a> {
    run_id: &'a str,
    kind: &'a str,
    attempt: u32,
    pass: u64,
    deadline: Timestamp,
    reply_topic: &'a str,
    reply_key: &'a str,
    issued_at: Timestamp,
}

/// [`Head`]'s fields, by tag.
fn put_head(h: &Head<'_>, buf: &mut Vec<u8>) {
    put_str(1, h.run_id, buf);
    put_str(2, h.kind, buf);
    put_uint(4, h.attempt.into(), buf);
    put_uint(5, h.pass, buf);
    put_ts(8, h.deadline, buf);
    put_str(9, h.reply_topic, buf);
    put_str(10, h.reply_key, buf);
    put_ts(11, h.issued_at, buf);
}

/// Field numbers of `RunCommand.params` and `RunCommand.source`.
const RUN_PARAMS: u32 = 6;
const RUN_SOURCE: u32 = 37;

/// Field number of `RunCommand.snapshot`.
const RUN_SNAPSHOT: u32 = 7;

/// Encodes a stage run command with where to reply and when it was issued.
/// The reply key is the offer id, so that the result reaches the partition
/// that owns the offer. The body and state are written canonically (the
/// same command gives the same bytes).
pub fn encode_stage_run_command(
    command: &StageRunCommand,
    reply_topic: &str,
    issued_at: Timestamp,
    format: Format,
) -> Vec<u8> {
    let mut buf = Vec::new();
    encode_stage_run_command_into(command, reply_topic, issued_at, format, &mut buf);
    buf
}

/// [`encode_stage_run_command`], appended to `buf`.
pub fn encode_stage_run_command_into(
    command: &StageRunCommand,
    reply_topic: &str,
    issued_at: Timestamp,
    format: Format,
    buf: &mut Vec<u8>,
) {
    let fields = stage_json_fields(command);
    match format {
        // Written straight from the command, in the order prost writes the
        // message (its fields by tag, then the offer and state), as a
        // step's is: copying every string into the generated message first
        // was a visible part of each stage run.
        Format::Protobuf => {
            put_head(
                &Head {
                    run_id: &command.run_id,
                    kind: KIND_STAGE,
                    attempt: command.attempt,
                    pass: command.pass,
                    deadline: command.deadline,
                    reply_topic,
                    reply_key: &command.offer,
                    issued_at,
                },
                buf,
            );
            put_str(20, &command.stage, buf);
            put_str(21, &command.offer, buf);
            put_uint(22, command.version, buf);
            put_str(
                RUN_SOURCE,
                command.source.as_deref().unwrap_or_default(),
                buf,
            );
            put_fields(&fields, buf);
        }
        Format::Json => encode_with_json_into(
            &stage_run_message(command, reply_topic, issued_at),
            &fields,
            format,
            buf,
        ),
    }
}

/// A stage's offer and state (a `null` one left out): JSON values, written
/// after the generated message.
fn stage_json_fields(command: &StageRunCommand) -> Vec<(u32, &'static str, JsonField<'_>)> {
    let mut fields = Vec::with_capacity(2);
    fields.push((23, "offer", JsonField::Struct(&command.body)));
    if let Some(state) = command.state.as_ref().filter(|s| !s.is_null()) {
        fields.push((24, "state", JsonField::Value(state)));
    }
    fields
}

/// A stage's run command as the generated message, without its offer and
/// state (for JSON, and the reference the straight writing is tested against).
fn stage_run_message(
    command: &StageRunCommand,
    reply_topic: &str,
    issued_at: Timestamp,
) -> v1::RunCommand {
    v1::RunCommand {
        run_id: command.run_id.as_str().to_owned(),
        kind: KIND_STAGE.to_string(),
        attempt: command.attempt,
        pass: command.pass,
        deadline: Some(timestamp_to_proto(command.deadline)),
        reply_topic: reply_topic.to_string(),
        reply_key: command.offer.clone(),
        issued_at: Some(timestamp_to_proto(issued_at)),
        stage: command.stage.clone(),
        offer_id: command.offer.clone(),
        version: command.version,
        source: command.source.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// Decodes a stage run command as a stage worker sees it (protobuf or
/// JSON). `kind` must be `stage`. The returned `topic` is empty (a record
/// does not know its topic); a `null` state reads as none, and an absent
/// `offer` as `{}`. Numbers are normalised.
pub fn decode_stage_run_command(bytes: &[u8]) -> Result<StageRunCommand, DecodeError> {
    let m: v1::RunCommand = decode(bytes)?;
    if m.kind != KIND_STAGE {
        return Err(DecodeError::InvalidField {
            field: "kind",
            reason: format!("expected `{KIND_STAGE}`, got `{}`", m.kind),
        });
    }
    let body = match m.offer {
        Some(offer) => body_from_struct("offer", offer)?,
        None => Body::new(),
    };
    let state = m
        .state
        .map(|s| json_from_value("state", s))
        .transpose()?
        .filter(|s| !s.is_null())
        .map(crate::stage::State::new);
    Ok(StageRunCommand {
        stage: non_empty("stage", m.stage)?,
        offer: non_empty("offer_id", m.offer_id)?,
        run_id: non_empty("run_id", m.run_id)?.into(),
        attempt: m.attempt,
        pass: m.pass,
        version: m.version,
        body: body.into(),
        state,
        deadline: required_ts("deadline", m.deadline.as_ref())?,
        source: Some(m.source).filter(|s| !s.is_empty()),
        topic: "".into(),
    })
}

/// Decodes a run command as a worker sees it (protobuf or JSON): the schema
/// type itself, since a worker needs the reply fields the core type lacks.
/// A stage run is refused: [`decode_stage_run_command`] reads those.
pub fn decode_run_command(bytes: &[u8]) -> Result<v1::RunCommand, DecodeError> {
    let mut m: v1::RunCommand = decode(bytes)?;
    if m.kind == KIND_STAGE {
        return Err(DecodeError::InvalidField {
            field: "kind",
            reason: "a stage run command; read it as one (decode_stage_run_command)".to_string(),
        });
    }
    // A worker cannot reply without it.
    m.run_id = non_empty("run_id", std::mem::take(&mut m.run_id))?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::time::timestamp_from_proto;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn command() -> RunCommand {
        RunCommand {
            run_id: "orders_daily#7".into(),
            attempt: 2,
            pass: 12,
            snapshot: [
                ("dwh.orders/max_dt".to_string(), ts("2021-04-25T03:27:33Z")),
                (
                    "dwh.users/updated_at".to_string(),
                    ts("2021-04-25T01:00:00.5Z"),
                ),
            ]
            .into(),
            params: [("mode".to_string(), "full".to_string())].into(),
            deadline: ts("2021-04-25T05:00:00Z"),
            key: "reports".into(),
            topic: None,
            source: None,
        }
    }

    #[test]
    fn round_trips_in_both_formats() {
        let cmd = command();
        let issued = ts("2021-04-25T04:00:00Z");
        for format in [Format::Protobuf, Format::Json] {
            let bytes = encode_run_command(&cmd, "reactor.results", "reports", issued, format);
            let m = decode_run_command(&bytes).unwrap();
            assert_eq!(m.run_id, cmd.run_id);
            assert_eq!(m.kind, "task");
            assert_eq!(m.task, cmd.task());
            assert_eq!((m.attempt, m.pass), (cmd.attempt, cmd.pass));
            assert_eq!(m.params, cmd.params);
            let snapshot: crate::ctl::ParamValues = m
                .snapshot
                .iter()
                .map(|(k, v)| (k.clone(), timestamp_from_proto(v).unwrap()))
                .collect();
            assert_eq!(snapshot, cmd.snapshot);
            assert_eq!(
                timestamp_from_proto(&m.deadline.unwrap()).unwrap(),
                cmd.deadline
            );
            assert_eq!(timestamp_from_proto(&m.issued_at.unwrap()).unwrap(), issued);
            assert_eq!(
                (m.reply_topic.as_str(), m.reply_key.as_str()),
                ("reactor.results", "reports")
            );
        }
    }

    #[test]
    fn json_output() {
        let bytes = encode_run_command(
            &command(),
            "reactor.results",
            "reports",
            ts("2021-04-25T04:00:00Z"),
            Format::Json,
        );
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "run_id": "orders_daily#7",
                "kind": "task",
                "task": "orders_daily",
                "attempt": 2,
                "pass": "12",
                "params": {"mode": "full"},
                "snapshot": {
                    "dwh.orders/max_dt": "2021-04-25T03:27:33+00:00",
                    "dwh.users/updated_at": "2021-04-25T01:00:00.500+00:00",
                },
                "deadline": "2021-04-25T05:00:00+00:00",
                "reply_topic": "reactor.results",
                "reply_key": "reports",
                "issued_at": "2021-04-25T04:00:00+00:00",
            })
        );
    }

    #[test]
    fn protobuf_is_deterministic() {
        let issued = ts("2021-04-25T04:00:00Z");
        let a = encode_run_command(&command(), "r", "k", issued, Format::Protobuf);
        let b = encode_run_command(&command(), "r", "k", issued, Format::Protobuf);
        assert_eq!(a, b);
    }

    proptest::proptest! {
        /// Written straight from the command, a run command is byte for
        /// byte what prost writes for the message (its snapshot last).
        #[test]
        fn a_run_command_is_written_as_prost_writes_it(
            task in "[a-z_#]{0,12}",
            attempt in proptest::prelude::any::<u32>(),
            pass in proptest::prelude::any::<u64>(),
            params in proptest::collection::btree_map("[a-z]{0,4}", "[a-z]{0,4}", 0..3),
            snapshot in proptest::collection::btree_map(
                "[a-z./]{0,8}",
                -100_000i64..100_000,
                0..3,
            ),
            deadline in -100_000i64..100_000_000_000,
            source in proptest::option::of("[a-z:0-9]{0,6}"),
            reply_key in "[a-z]{0,6}",
        ) {
            let command = RunCommand {
                run_id: format!("{task}#1").into(),
                attempt,
                pass,
                snapshot: snapshot
                    .into_iter()
                    .map(|(k, s)| (k, Timestamp::from_second(s).unwrap()))
                    .collect(),
                params,
                deadline: Timestamp::from_millisecond(deadline).unwrap(),
                key: "".into(),
                topic: None,
                source,
            };
            let issued = ts("2021-04-25T04:00:00.25Z");
            let ours = encode_run_command(&command, "reactor.results", &reply_key, issued, Format::Protobuf);
            // The room reserved for it holds it (no second allocation).
            let room = run_command_room(&command, "reactor.results", &reply_key);
            proptest::prop_assert!(room >= ours.len(), "{} reserved for {}", room, ours.len());
            let mut m = task_run_message(&command, "reactor.results", &reply_key, issued);
            m.snapshot.clear();
            let mut theirs = prost::Message::encode_to_vec(&m);
            put_ts_map(RUN_SNAPSHOT, &command.snapshot, &mut theirs);
            proptest::prop_assert_eq!(ours, theirs);
        }
    }

    proptest::proptest! {
        /// Written straight from the command, a stage's run command is byte
        /// for byte what prost writes for the message, offer and state
        /// after it.
        #[test]
        fn a_stage_run_command_is_written_as_prost_writes_it(
            stage in "[a-z_]{0,8}",
            offer in "[a-z0-9/]{0,8}",
            attempt in proptest::prelude::any::<u32>(),
            pass in proptest::prelude::any::<u64>(),
            version in proptest::prelude::any::<u64>(),
            price in -1000i64..1000,
            state in proptest::option::of(proptest::prop_oneof![
                proptest::strategy::Just(serde_json::Value::Null),
                proptest::strategy::Strategy::prop_map(-1000i64..1000, |n| serde_json::json!({"seen": n})),
                proptest::strategy::Strategy::prop_map("[a-z]{0,200}", serde_json::Value::from),
            ]),
            deadline in -100_000i64..100_000_000_000,
            source in proptest::option::of("[a-z:0-9]{0,6}"),
        ) {
            let body = serde_json::json!({"price": price, "name": "x".repeat(150)});
            let command = StageRunCommand {
                stage: stage.clone(),
                offer: offer.clone(),
                run_id: format!("{stage}/{offer}#1").into(),
                attempt,
                pass,
                version,
                body: body.as_object().unwrap().clone().into(),
                state: state.map(Into::into),
                deadline: Timestamp::from_millisecond(deadline).unwrap(),
                source,
                topic: "".into(),
            };
            let issued = ts("2021-04-25T04:00:00.25Z");
            let ours = encode_stage_run_command(&command, "reactor.results", issued, Format::Protobuf);
            let mut theirs = Vec::new();
            encode_with_json_into(
                &stage_run_message(&command, "reactor.results", issued),
                &stage_json_fields(&command),
                Format::Protobuf,
                &mut theirs,
            );
            proptest::prop_assert_eq!(ours, theirs);
        }
    }

    proptest::proptest! {
        /// Written straight from the command, a step's run command is byte
        /// for byte what prost writes for the message, args and context
        /// after it.
        #[test]
        fn a_step_run_command_is_written_as_prost_writes_it(
            process in "[a-z_]{1,8}",
            key in "[a-z0-9]{1,8}",
            n in 0u32..1000,
            step in proptest::prelude::any::<u32>(),
            job in "[a-z_]{1,8}",
            attempt in proptest::prelude::any::<u32>(),
            pass in proptest::prelude::any::<u64>(),
            params in proptest::collection::btree_map("[a-z]{0,4}", 0i64..1000, 0..3),
            context in proptest::collection::btree_map("[a-z]{0,4}", "[a-z]{0,4}", 0..3),
            deadline in -100_000i64..100_000_000_000,
            source in proptest::option::of("[a-z:0-9]{1,6}"),
        ) {
            let instance = format!("{process}/{key}#{n}");
            let command = StepRunCommand {
                run_id: format!("{instance}.{step}#1").into(),
                process,
                key,
                instance,
                step,
                job: job.into(),
                attempt,
                pass,
                params: params.into_iter().map(|(k, v)| (k, serde_json::json!(v))).collect(),
                context: context.into_iter().map(|(k, v)| (k, serde_json::json!(v))).collect(),
                deadline: Timestamp::from_millisecond(deadline).unwrap(),
                source,
                // Not on the wire: the topic the command is sent to.
                topic: "".into(),
            };
            let issued = ts("2021-04-25T04:00:00.25Z");
            let ours = encode_step_run_command(&command, "reactor.results", issued, Format::Protobuf);
            let mut theirs = Vec::new();
            encode_with_json_into(
                &step_run_message(&command, "reactor.results", issued),
                &step_json_fields(&command),
                Format::Protobuf,
                &mut theirs,
            );
            proptest::prop_assert_eq!(&ours, &theirs);
            proptest::prop_assert_eq!(decode_step_run_command(&ours).unwrap(), command);
        }
    }

    fn stage_command() -> StageRunCommand {
        StageRunCommand {
            stage: "price".into(),
            offer: "o1".into(),
            run_id: "price/o1#3".into(),
            attempt: 2,
            pass: 9,
            version: 4,
            body:
                serde_json::json!({"status": "active", "price": 100, "ratio": 0.5, "tags": ["a"]})
                    .as_object()
                    .unwrap()
                    .clone()
                    .into(),
            state: Some(serde_json::json!({"model": 3}).into()),
            deadline: ts("2024-06-01T00:01:00Z"),
            topic: "stage.price.runs".into(),
            source: None,
        }
    }

    #[test]
    fn stage_commands_round_trip_in_both_formats() {
        let issued = ts("2024-06-01T00:00:00Z");
        let without_state = StageRunCommand {
            state: None,
            body: Body::new().into(),
            ..stage_command()
        };
        for format in [Format::Protobuf, Format::Json] {
            for cmd in [stage_command(), without_state.clone()] {
                let bytes = encode_stage_run_command(&cmd, "reactor.results", issued, format);
                let decoded = decode_stage_run_command(&bytes).unwrap();
                assert_eq!(
                    decoded,
                    StageRunCommand {
                        topic: "".into(),
                        ..cmd.clone()
                    },
                    "{format:?}"
                );
                // The worker's view has the reply fields.
                let m: v1::RunCommand = decode(&bytes).unwrap();
                assert_eq!(m.reply_key, "o1");
                assert_eq!(m.reply_topic, "reactor.results");
                assert_eq!(timestamp_from_proto(&m.issued_at.unwrap()).unwrap(), issued);
                // A task worker's decoder refuses it.
                assert!(decode_run_command(&bytes)
                    .unwrap_err()
                    .to_string()
                    .starts_with("field `kind`: a stage run command"));
            }
        }
    }

    #[test]
    fn stage_json_output() {
        let bytes = encode_stage_run_command(
            &stage_command(),
            "reactor.results",
            ts("2024-06-01T00:00:00Z"),
            Format::Json,
        );
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "run_id": "price/o1#3",
                "kind": "stage",
                "attempt": 2,
                "pass": "9",
                "deadline": "2024-06-01T00:01:00+00:00",
                "reply_topic": "reactor.results",
                "reply_key": "o1",
                "issued_at": "2024-06-01T00:00:00+00:00",
                "stage": "price",
                "offer_id": "o1",
                "version": "4",
                "offer": {"status": "active", "price": 100, "ratio": 0.5, "tags": ["a"]},
                "state": {"model": 3},
            })
        );
    }

    #[test]
    fn stage_protobuf_is_deterministic() {
        let issued = ts("2024-06-01T00:00:00Z");
        let a = encode_stage_run_command(&stage_command(), "r", issued, Format::Protobuf);
        let b = encode_stage_run_command(&stage_command(), "r", issued, Format::Protobuf);
        assert_eq!(a, b);
    }

    #[test]
    fn invalid_stage_commands() {
        let reason = |json: &str| {
            decode_stage_run_command(json.as_bytes())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            reason(r#"{"run_id":"t#1","kind":"task"}"#),
            "field `kind`: expected `stage`, got `task`"
        );
        assert_eq!(
            reason(r#"{"run_id":"p/o#1","kind":"stage","offer_id":"o"}"#),
            "missing field `stage`"
        );
        assert_eq!(
            reason(r#"{"run_id":"p/o#1","kind":"stage","stage":"p","offer_id":"o"}"#),
            "missing field `deadline`"
        );
        // A null state is no state; protobuf doubles become integers.
        let c = decode_stage_run_command(
            br#"{"run_id":"p/o#1","kind":"stage","stage":"p","offer_id":"o","state":null,
                 "offer":{"n":2.0},"deadline":"2024-06-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(c.state, None);
        assert!(c.body["n"].is_i64());
    }

    #[test]
    fn run_id_is_required() {
        assert_eq!(
            decode_run_command(br#"{"task":"t"}"#).unwrap_err(),
            DecodeError::MissingField("run_id")
        );
    }
}
