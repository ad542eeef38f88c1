"""Run commands in, run results out: protobuf (Reactor's default) or the
proto3 JSON mapping (a value whose first non-blank byte is ``{``), as
``schemas/reactor.proto`` describes. A reply uses the format of its command.
"""

from __future__ import annotations

import math
from datetime import timezone
from typing import Any, Optional, Sequence, Tuple

from google.protobuf import json_format, struct_pb2
from google.protobuf.message import DecodeError

from . import reactor_pb2 as pb
from .runs import JobResult, Run, StageResult, StageRun, StepRun, TaskRun

#: Values past 2^53 are not exact as doubles: they stay floats.
_EXACT = 2**53


class BadCommand(ValueError):
    """A record on a run topic that is not a usable ``RunCommand``."""


def is_json(value: bytes) -> bool:
    """Whether a record value is proto3 JSON rather than protobuf."""
    return value.lstrip()[:1] == b"{"


def _ints(value: Any) -> Any:
    """Struct numbers are doubles: an integral one is read as the integer,
    as Reactor does, so protobuf and JSON commands give the same values."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT:
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _plain(message, field: str) -> Any:
    """A Struct or Value field as Python data; None when unset."""
    if not message.HasField(field):
        return None
    return _ints(json_format.MessageToDict(getattr(message, field)))


def _time(message, field: str):
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=timezone.utc)


def decode(value: Optional[bytes], headers: Optional[Sequence[Tuple[str, bytes]]] = None) -> Run:
    """Decodes a run command record into a :class:`TaskRun`,
    :class:`StageRun` or :class:`StepRun`; :class:`BadCommand` otherwise."""
    if not value:
        raise BadCommand("empty record")
    command = pb.RunCommand()
    try:
        if is_json(value):
            # Unknown fields are skipped, as protobuf skips them: a newer
            # Reactor's fields do not break an older worker.
            json_format.Parse(value.decode("utf-8"), command, ignore_unknown_fields=True)
        else:
            command.ParseFromString(value)
    except (json_format.ParseError, DecodeError, UnicodeDecodeError, RecursionError) as e:
        raise BadCommand(f"not a RunCommand: {e}") from e
    try:
        return _run(command, headers)
    except BadCommand:
        raise
    except (ValueError, OverflowError) as e:
        # E.g. a timestamp out of datetime's range.
        raise BadCommand(f"run {command.run_id}: {e}") from e


def _run(command: pb.RunCommand, headers) -> Run:
    if not command.run_id or not command.reply_topic or not command.reply_key:
        raise BadCommand(f"run {command.run_id!r}: run_id, reply_topic and reply_key are required")
    common = dict(
        run_id=command.run_id,
        kind=command.kind,
        attempt=command.attempt,
        pass_=getattr(command, "pass"),
        deadline=_time(command, "deadline"),
        issued_at=_time(command, "issued_at"),
        reply_topic=command.reply_topic,
        reply_key=command.reply_key,
        source=command.source,
        headers=tuple((k, v if v is not None else b"") for k, v in (headers or ())),
    )
    if command.kind == "task":
        return TaskRun(
            **common,
            task=command.task,
            params=dict(command.params),
            snapshot={k: v.ToDatetime(tzinfo=timezone.utc) for k, v in command.snapshot.items()},
        )
    if command.kind == "stage":
        return StageRun(
            **common,
            stage=command.stage,
            offer_id=command.offer_id,
            version=command.version,
            offer=_plain(command, "offer") or {},
            state=_plain(command, "state"),
        )
    if command.kind == "step":
        return StepRun(
            **common,
            process=command.process,
            key=command.key,
            instance=command.instance,
            step=command.step,
            job=command.job,
            args=_plain(command, "args") or {},
            context=_plain(command, "context") or {},
        )
    raise BadCommand(f"run {command.run_id}: unknown kind {command.kind!r}")


def _struct(value: dict, what: str) -> struct_pb2.Struct:
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a dict, not {type(value).__name__}")
    _check_numbers(value, what)
    s = struct_pb2.Struct()
    s.update(value)
    return s


def _check_numbers(value: Any, what: str):
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what}: {value} is not a JSON number")
    if isinstance(value, dict):
        for v in value.values():
            _check_numbers(v, what)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _check_numbers(v, what)


def result(run: Run, outcome: Any = None, error: Optional[str] = None) -> pb.RunResult:
    """The ``RunResult`` for ``run``: failed with ``error`` when given, else
    succeeded with what the handler returned (None, a :class:`StageResult`
    for a stage, a :class:`JobResult` for a step).

    Echoes ``run_id``, ``pass`` and ``reply_key`` (and a stage's
    ``version``). A return value of the wrong type is a ``TypeError``.
    """
    r = pb.RunResult(run_id=run.run_id, reply_key=run.reply_key)
    setattr(r, "pass", run.pass_)
    if isinstance(run, StageRun):
        r.version = run.version
    if error is not None:
        r.status = pb.RUN_STATUS_FAILED
        r.error = error
        return r
    r.status = pb.RUN_STATUS_SUCCEEDED
    if outcome is None:
        return r
    if isinstance(run, StageRun) and isinstance(outcome, StageResult):
        if outcome.update is not None:
            r.update.CopyFrom(_struct(outcome.update, "update"))
        if outcome.body is not None:
            r.body.CopyFrom(_struct(outcome.body, "body"))
        if outcome.state is not None:
            _check_numbers(outcome.state, "state")
            json_format.ParseDict(outcome.state, r.state)
        r.clear_state = outcome.clear_state
        if outcome.timer is not None:
            r.timer.FromDatetime(outcome.timer)
        r.clear_timer = outcome.clear_timer
        return r
    if isinstance(run, StepRun) and isinstance(outcome, JobResult):
        if outcome.output is not None:
            r.output.CopyFrom(_struct(outcome.output, "output"))
        for n in outcome.next:
            job = r.next.add(job=n.job, position=n.position)
            if n.params is not None:
                job.params.CopyFrom(_struct(n.params, "next.params"))
        r.goal_reached = outcome.goal_reached
        return r
    expected = {"task": "None", "stage": "None or a StageResult", "step": "None or a JobResult"}[run.kind]
    raise TypeError(f"a {run.kind} handler returns {expected}, not {type(outcome).__name__}")


def encode(message, as_json: bool) -> bytes:
    """A message as protobuf, or as compact proto3 JSON with the schema's
    field names."""
    if not as_json:
        return message.SerializeToString()
    return json_format.MessageToJson(message, preserving_proto_field_name=True, indent=None).encode()
