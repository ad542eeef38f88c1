"""Unit tests: decoding commands, dispatching to handlers, encoding replies,
and the loop's commit-after-delivery rule, with no broker."""

import json
from datetime import datetime, timedelta, timezone

import pytest
from google.protobuf import json_format

from reactor_worker import Failed, JobResult, NextJob, StageResult, Worker, decode
from reactor_worker import reactor_pb2 as pb
from reactor_worker.codec import BadCommand

NOW = datetime(2024, 6, 1, 0, 0, 30, tzinfo=timezone.utc)


def ts(s):
    t = pb.google_dot_protobuf_dot_timestamp__pb2.Timestamp()
    t.FromJsonString(s)
    return t


def task_command(**over):
    c = pb.RunCommand(
        run_id="orders_daily#7",
        kind="task",
        task="orders_daily",
        attempt=2,
        reply_topic="reactor.results",
        reply_key="reports",
        params={"format": "parquet"},
    )
    setattr(c, "pass", 12)
    c.snapshot["dwh.orders/max_dt"].CopyFrom(ts("2024-05-31T00:00:00Z"))
    c.deadline.CopyFrom(ts("2024-06-01T00:01:00Z"))
    c.issued_at.CopyFrom(ts("2024-06-01T00:00:00Z"))
    for k, v in over.items():
        setattr(c, k, v)
    return c


def stage_command():
    c = pb.RunCommand(
        run_id="price/o1#3",
        kind="stage",
        stage="price",
        offer_id="o1",
        version=4,
        attempt=1,
        reply_topic="reactor.results",
        reply_key="o1",
    )
    setattr(c, "pass", 9)
    c.offer.update({"status": "active", "price": 100, "tags": [1, 2.5]})
    c.deadline.CopyFrom(ts("2024-06-01T00:01:00Z"))
    return c


def step_command():
    c = pb.RunCommand(
        run_id="payout/k1#1/0",
        kind="step",
        process="payout",
        key="k1",
        instance="payout/k1#1",
        step=0,
        job="send_tx",
        attempt=1,
        reply_topic="reactor.results",
        reply_key="k1",
        source="op:42",
    )
    setattr(c, "pass", 3)
    c.args.update({"amount": 250})
    c.context.update({"reserved": True})
    return c


def worker():
    return Worker("unused:9092", "g", clock=lambda: NOW)


def parse(value):
    r = pb.RunResult()
    if value.lstrip().startswith(b"{"):
        json_format.Parse(value.decode(), r)
    else:
        r.ParseFromString(value)
    return r


def test_task_run_decoded_and_answered_in_protobuf():
    w = worker()
    seen = []

    @w.task("orders_daily")
    def handler(run):
        seen.append(run)

    reply = w.handle(task_command().SerializeToString(), [("traceparent", b"00-ab-cd-01")])
    (run,) = seen
    assert run.task == "orders_daily" and run.attempt == 2 and run.pass_ == 12
    assert run.params == {"format": "parquet"}
    assert run.snapshot == {"dwh.orders/max_dt": datetime(2024, 5, 31, tzinfo=timezone.utc)}
    assert run.deadline == datetime(2024, 6, 1, 0, 1, tzinfo=timezone.utc)
    assert run.headers == (("traceparent", b"00-ab-cd-01"),)
    # The trace goes on in the reply.
    assert reply.headers == (("traceparent", b"00-ab-cd-01"),)
    assert (reply.topic, reply.key, reply.failed) == ("reactor.results", "reports", False)
    assert not reply.value.startswith(b"{")
    r = parse(reply.value)
    assert (r.run_id, getattr(r, "pass"), r.reply_key, r.status) == ("orders_daily#7", 12, "reports", pb.RUN_STATUS_SUCCEEDED)
    assert r.error == ""


def test_json_command_gets_a_json_reply():
    w = worker()
    w.task("orders_daily")(lambda run: None)
    text = json_format.MessageToJson(task_command(), preserving_proto_field_name=True)
    reply = w.handle(b"  " + text.encode())
    body = json.loads(reply.value)
    # uint64 as a string, the schema's field names, defaults left out.
    assert body == {"run_id": "orders_daily#7", "pass": "12", "reply_key": "reports", "status": "RUN_STATUS_SUCCEEDED"}


def test_json_command_in_camel_case_with_unknown_fields():
    value = json.dumps(
        {
            "runId": "orders_daily#8",
            "kind": "task",
            "task": "orders_daily",
            "pass": "13",
            "replyTopic": "reactor.results",
            "replyKey": "reports",
            "a_field_from_a_newer_reactor": 1,
        }
    ).encode()
    run = decode(value)
    assert (run.run_id, run.pass_, run.deadline, run.snapshot) == ("orders_daily#8", 13, None, {})


def test_stage_run_and_result():
    w = worker()
    seen = []

    @w.stage("price")
    def price(run):
        seen.append(run)
        return StageResult(
            update={"price_predicted": 118, "promo": None},
            state={"model": 3},
            timer=datetime(2024, 7, 1, tzinfo=timezone.utc),
        )

    reply = w.handle(stage_command().SerializeToString())
    (run,) = seen
    # Struct numbers are doubles on the wire; integral ones come back as ints.
    assert run.offer == {"status": "active", "price": 100, "tags": [1, 2.5]}
    assert isinstance(run.offer["price"], int)
    assert (run.stage, run.offer_id, run.version, run.state) == ("price", "o1", 4, None)
    r = parse(reply.value)
    assert r.version == 4 and r.reply_key == "o1" and getattr(r, "pass") == 9
    assert json_format.MessageToDict(r.update) == {"price_predicted": 118, "promo": None}
    assert json_format.MessageToDict(r.state) == {"model": 3}
    assert r.timer.ToJsonString() == "2024-07-01T00:00:00Z"
    assert not r.clear_state and not r.clear_timer and not r.HasField("body")


def test_stage_state_given_and_cleared():
    w = worker()
    c = stage_command()
    c.state.struct_value.update({"model": 2})
    w.stage("price")(lambda run: StageResult(clear_state=True, clear_timer=True))
    run = decode(c.SerializeToString())
    assert run.state == {"model": 2}
    r = parse(w.handle(c.SerializeToString()).value)
    assert r.clear_state and r.clear_timer and not r.HasField("state")


def test_step_run_and_job_result():
    w = worker()
    seen = []

    @w.job("send_tx")
    def send_tx(run):
        seen.append(run)
        return JobResult(
            output={"tx": "t-1"},
            next=(NextJob("notify", params={"channel": "sms"}, position="front"), NextJob("audit")),
            goal_reached=True,
        )

    reply = w.handle(step_command().SerializeToString())
    (run,) = seen
    assert (run.process, run.key, run.instance, run.step, run.job) == ("payout", "k1", "payout/k1#1", 0, "send_tx")
    assert run.args == {"amount": 250} and run.context == {"reserved": True} and run.source == "op:42"
    r = parse(reply.value)
    assert r.reply_key == "k1" and r.status == pb.RUN_STATUS_SUCCEEDED and r.goal_reached
    assert json_format.MessageToDict(r.output) == {"tx": "t-1"}
    assert [(n.job, n.position, json_format.MessageToDict(n.params)) for n in r.next] == [
        ("notify", "front", {"channel": "sms"}),
        ("audit", "back", {}),
    ]
    assert not r.next[1].HasField("params")


def test_a_raising_handler_fails_the_run():
    w = worker()

    @w.task("orders_daily")
    def boom(run):
        raise RuntimeError("db down")

    reply = w.handle(task_command().SerializeToString())
    r = parse(reply.value)
    assert reply.failed and r.status == pb.RUN_STATUS_FAILED and r.error == "RuntimeError: db down"
    assert r.run_id == "orders_daily#7" and getattr(r, "pass") == 12


def test_failed_carries_its_message_only():
    w = worker()

    def no_data(run):
        raise Failed("no data for 2024-05-31")

    w.task("orders_daily")(no_data)
    assert parse(w.handle(task_command().SerializeToString()).value).error == "no data for 2024-05-31"


@pytest.mark.parametrize(
    "command,kind,outcome",
    [
        (task_command, "task", StageResult()),
        (stage_command, "stage", {"price": 1}),
        (step_command, "job", StageResult()),
    ],
)
def test_a_wrong_return_value_fails_the_run(command, kind, outcome):
    w = worker()
    name = {"task": "orders_daily", "stage": "price", "job": "send_tx"}[kind]
    getattr(w, kind)(name)(lambda run: outcome)
    r = parse(w.handle(command().SerializeToString()).value)
    assert r.status == pb.RUN_STATUS_FAILED and r.error.startswith("TypeError: a ")


def test_past_deadline_is_skipped():
    calls = []
    late = Worker("unused:9092", "g", clock=lambda: NOW + timedelta(minutes=5))
    late.task("orders_daily")(calls.append)
    assert late.handle(task_command().SerializeToString()) is None
    assert calls == []


def test_no_handler_and_bad_records_are_skipped():
    w = worker()
    w.task("other")(lambda run: None)
    assert w.handle(task_command().SerializeToString()) is None
    assert w.handle(b"\xff\xff\xff") is None
    assert w.handle(b"{not json") is None
    assert w.handle(None) is None
    assert w.handle(task_command(reply_key="").SerializeToString()) is None
    with pytest.raises(BadCommand):
        decode(pb.RunCommand(run_id="x#1", kind="cron", reply_topic="t", reply_key="k").SerializeToString())


def test_out_of_range_values_are_bad_commands():
    c = task_command()
    # Year 10000: valid protobuf, not a datetime.
    c.snapshot["dwh.orders/max_dt"].seconds = 253402300800 + 86400
    with pytest.raises(BadCommand, match="orders_daily#7"):
        decode(c.SerializeToString())
    w = worker()
    w.task("orders_daily")(lambda run: None)
    assert w.handle(c.SerializeToString()) is None


def test_a_result_that_cannot_be_encoded_fails_the_run():
    w = worker()
    w.stage("price")(lambda run: StageResult(state={"at": datetime(2024, 1, 1)}))
    r = parse(w.handle(stage_command().SerializeToString()).value)
    assert r.status == pb.RUN_STATUS_FAILED and r.error.startswith("ParseError: ")
    assert getattr(r, "pass") == 9 and r.version == 4


def test_topics_follow_the_handlers_unless_given():
    w = worker()
    w.task("a")(lambda run: None)
    w.task("b")(lambda run: None)
    w.stage("price")(lambda run: None)
    w.job("send_tx")(lambda run: None)
    assert w.topics == ["reactor.runs", "stage.price.runs", "job.send_tx.runs"]
    assert Worker("b:9092", "g", ["pricing.runs"]).topics == ["pricing.runs"]
    with pytest.raises(ValueError):
        w.task("a")(lambda run: None)


def test_result_validation():
    with pytest.raises(ValueError):
        StageResult(update={}, body={})
    with pytest.raises(ValueError):
        StageResult(state={"a": 1}, clear_state=True)
    with pytest.raises(ValueError):
        StageResult(timer=datetime(2024, 1, 1))
    with pytest.raises(ValueError):
        NextJob("x", position="middle")


# ------------------------------------------------------------------ loop --


class FakeMessage:
    def __init__(self, value, offset, topic="reactor.runs", partition=0):
        self._value, self._offset, self._topic, self._partition = value, offset, topic, partition

    def value(self):
        return self._value

    def headers(self):
        return None

    def error(self):
        return None

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset


class FakeConsumer:
    """Serves scripted messages, then stops the worker."""

    def __init__(self, messages, worker, events):
        self.messages, self.worker, self.events = messages, worker, events
        self.next = 0

    def subscribe(self, topics):
        self.events.append(("subscribe", tuple(topics)))

    def poll(self, timeout):
        if self.next >= len(self.messages):
            self.worker.stop()
            return None
        m = self.messages[self.next]
        self.next += 1
        return m

    def store_offsets(self, message):
        self.events.append(("store", message.offset()))

    def close(self):
        self.events.append(("close",))


class FakeProducer:
    """Delivers each produced record with the next scripted error (None: ok)."""

    def __init__(self, errors, events, on_error=lambda: None):
        self.errors, self.events, self.pending, self.on_error = list(errors), events, [], on_error

    def produce(self, topic, key, value, on_delivery, headers=()):
        self.events.append(("produce", topic, key))
        self.pending.append(on_delivery)

    def poll(self, timeout):
        return 0

    def flush(self, timeout):
        while self.pending:
            err = self.errors.pop(0) if self.errors else None
            self.events.append(("delivered", err))
            if err is not None:
                self.on_error()
            self.pending.pop(0)(err, None)
        return 0


def run_loop(monkeypatch, messages, delivery_errors, stop_on_error=False):
    import confluent_kafka

    import reactor_worker.worker as wmod

    monkeypatch.setattr(wmod, "RETRY_BACKOFF", 0)
    events = []
    w = Worker("fake:9092", "g", clock=lambda: NOW)
    w.task("orders_daily")(lambda run: None)
    monkeypatch.setattr(confluent_kafka, "Consumer", lambda conf, logger: FakeConsumer(messages, w, events))
    on_error = w.stop if stop_on_error else (lambda: None)
    monkeypatch.setattr(
        confluent_kafka, "Producer", lambda conf, logger: FakeProducer(delivery_errors, events, on_error)
    )
    w.run(install_signal_handlers=False)
    return events


def test_offset_is_stored_only_after_the_reply_is_delivered(monkeypatch):
    value = task_command().SerializeToString()
    events = run_loop(monkeypatch, [FakeMessage(value, 5), FakeMessage(b"junk", 6)], [None])
    assert events == [
        ("subscribe", ("reactor.runs",)),
        ("produce", "reactor.results", b"reports"),
        ("delivered", None),
        ("store", 5),
        # Nothing to answer for junk: stored at once.
        ("store", 6),
        ("close",),
    ]


def test_an_undelivered_reply_is_sent_again(monkeypatch):
    value = task_command().SerializeToString()
    events = run_loop(monkeypatch, [FakeMessage(value, 5)], ["broker down", None])
    assert events == [
        ("subscribe", ("reactor.runs",)),
        ("produce", "reactor.results", b"reports"),
        ("delivered", "broker down"),
        # The same reply again: the handler ran once.
        ("produce", "reactor.results", b"reports"),
        ("delivered", None),
        ("store", 5),
        ("close",),
    ]


def test_stopping_before_delivery_leaves_the_offset_uncommitted(monkeypatch):
    value = task_command().SerializeToString()
    events = run_loop(monkeypatch, [FakeMessage(value, 5)], ["broker down"], stop_on_error=True)
    assert events == [
        ("subscribe", ("reactor.runs",)),
        ("produce", "reactor.results", b"reports"),
        ("delivered", "broker down"),
        ("close",),
    ]


def test_settings():
    w = Worker("b:9092", "g", config={"security.protocol": "SASL_SSL"})
    c, p = w.consumer_config(), w.producer_config()
    assert c["isolation.level"] == "read_committed" and c["enable.auto.offset.store"] is False
    assert p["partitioner"] == "murmur2_random" and p["enable.idempotence"] is True
    assert c["security.protocol"] == p["security.protocol"] == "SASL_SSL"
