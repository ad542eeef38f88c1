"""End to end on a broker: a real `reactor run` dispatches task, stage and
process-step runs of examples/dev.toml's targets, and the example worker
(examples/workers/worker.py, on this package) answers them.

Needs REACTOR_TEST_BROKERS (`.ci/ecosystem` starts kfake) and the reactor
binary (REACTOR_BIN, else target/debug/reactor or target/release/reactor).
Skipped without a broker unless REACTOR_TEST_REQUIRE_BROKER is set.

Each case produces its input and waits for what Reactor committed because
the worker answered; a new kind of run is one more entry in CASES.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from google.protobuf import json_format

from reactor_worker import reactor_pb2 as pb

REPO = pathlib.Path(__file__).resolve().parents[3]
WAIT = 90.0

BROKERS = os.environ.get("REACTOR_TEST_BROKERS", "")
if not BROKERS and os.environ.get("REACTOR_TEST_REQUIRE_BROKER"):
    raise RuntimeError("REACTOR_TEST_REQUIRE_BROKER is set but REACTOR_TEST_BROKERS is empty")
pytestmark = [
    pytest.mark.broker,
    pytest.mark.skipif(not BROKERS, reason="REACTOR_TEST_BROKERS names no broker"),
]

# examples/dev.toml's tasks and stages (the example worker's targets), on
# topics of this run only.
CONFIG = """
time_zone = "UTC"

[[pool]]
name = "etl"

[[pool]]
name = "reports"
max_running = 2

[[task]]
id = "load_orders"
pool = "etl"
trigger = "chunk_delta(raw.orders/max_dt, minute)"
produces = ["dwh.orders/max_dt"]
timeout = "30s"

[[task]]
id = "dashboard"
pool = "reports"
trigger = "any(delta(dwh.orders/max_dt, 30s), delta(dwh.users/updated_at, 1min))"
timeout = "30s"

[[stage]]
name = "expire"
watch = ["published_at", "status"]
when = "false"
timer = "offer.status == 'active' ? timestamp(offer.published_at) + duration('4320h') : null"
topic = "{p}.stage.expire.runs"
timeout = "30s"

[[stage]]
name = "price"
watch = ["price", "category"]
when = "has(offer.price) && (state == null || state.model < 3 || state.price != offer.price)"
topic = "{p}.stage.price.runs"
timeout = "30s"
retry = {{ attempts = 5, backoff = "30s", tiers = ["1h"] }}

[[job]]
name = "reserve"
topic = "{p}.job.reserve.runs"
timeout = "30s"

[[job]]
name = "send_tx"
topic = "{p}.job.send_tx.runs"
timeout = "30s"
retry = {{ attempts = 1, backoff = "1s", tiers = [] }}

[[job]]
name = "notify"
topic = "{p}.job.notify.runs"
timeout = "30s"

[[process]]
name = "payout"
steps = ["reserve", "send_tx", "notify"]
reuse = "failed_only"
when = "params.amount > 0"

[kafka]
group_id = "{p}"
partitions = 3
commit_interval = "100ms"

[kafka.topics]
ctl = "{p}.ctl"
offers = "{p}.offers"
results = "{p}.results"
commands = "{p}.commands"
runs = "{p}.runs"
offer_state = "{p}.offer_state"
events = "{p}.events"
dead = "{p}.dead"
changelog = "{p}.changelog"

[kafka.librdkafka]
"session.timeout.ms" = "6000"
"heartbeat.interval.ms" = "1000"
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reactor_bin():
    given = os.environ.get("REACTOR_BIN")
    if given:
        return given
    built = [REPO / "target" / p / "reactor" for p in ("debug", "release")]
    built = [b for b in built if b.exists()]
    if not built:
        pytest.fail("no reactor binary: run `cargo build` or set REACTOR_BIN")
    return str(max(built, key=lambda b: b.stat().st_mtime))


def get(url):
    """(status, body) of a GET; (None, None) while nothing listens."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None, None


def wait_for(what, check, timeout=WAIT, procs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in procs:
            if p.poll() is not None:
                pytest.fail(f"{name} exited with {p.returncode} while waiting for {what}")
        value = check()
        if value:
            return value
        time.sleep(0.3)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class Stack:
    prefix: str
    admin: str
    producer: Producer
    procs: list

    def topic(self, name):
        return f"{self.prefix}.{name}"

    def produce(self, topic, key, message):
        errors = []
        self.producer.produce(
            self.topic(topic),
            key=key.encode(),
            value=message.SerializeToString(),
            on_delivery=lambda err, _m: err and errors.append(err),
        )
        assert self.producer.flush(15) == 0 and not errors, errors

    def consume(self, topic, message_type, match, what):
        """The first committed record of `topic` that `match` accepts,
        decoded as `message_type`: a downstream read_committed consumer."""
        consumer = Consumer(
            {
                "bootstrap.servers": BROKERS,
                "group.id": f"{self.prefix}-reader-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
            }
        )
        consumer.subscribe([self.topic(topic)])
        try:

            def poll():
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    if msg is not None and msg.error().code() != KafkaError._PARTITION_EOF:
                        print("reader:", msg.error(), file=sys.stderr)
                    return None
                value = message_type()
                value.ParseFromString(msg.value())
                return value if match(value) else None

            return wait_for(what, poll, procs=self.procs)
        finally:
            consumer.close()

    def task(self, task_id):
        status, body = get(f"{self.admin}/tasks/{task_id}")
        return json.loads(body) if status == 200 else None


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    prefix = f"pyw{uuid.uuid4().hex[:8]}"
    tmp = tmp_path_factory.mktemp(prefix)
    config = tmp / "reactor.toml"
    config.write_text(CONFIG.format(p=prefix))
    port = free_port()
    admin = f"http://127.0.0.1:{port}"
    logs = []

    def start(name, argv):
        log = open(tmp / f"{name}.log", "w")
        logs.append((name, tmp / f"{name}.log", log))
        return name, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)

    reactor = start(
        "reactor",
        [
            reactor_bin(),
            "run",
            "--config",
            str(config),
            "--brokers",
            BROKERS,
            "--admin",
            f"127.0.0.1:{port}",
            "--instance-id",
            "py-e2e",
        ],
    )
    procs = [reactor]
    try:
        wait_for("reactor /readyz", lambda: get(f"{admin}/readyz")[0] == 200, procs=procs)
        worker = start(
            "worker",
            [
                sys.executable,
                str(REPO / "examples" / "workers" / "worker.py"),
                "--brokers",
                BROKERS,
                "--group",
                f"{prefix}-workers",
                "--ctl-topic",
                f"{prefix}.ctl",
                "--topic",
                f"{prefix}.runs",
                "--topic",
                f"{prefix}.stage.expire.runs",
                "--topic",
                f"{prefix}.stage.price.runs",
                "--topic",
                f"{prefix}.job.reserve.runs",
                "--topic",
                f"{prefix}.job.send_tx.runs",
                "--topic",
                f"{prefix}.job.notify.runs",
            ],
        )
        procs.append(worker)
        producer = Producer({"bootstrap.servers": BROKERS, "partitioner": "murmur2_random", "enable.idempotence": True})
        yield Stack(prefix, admin, producer, procs)
    finally:
        for _, p in reversed(procs):
            p.terminate()
        for _, p in reversed(procs):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        for name, path, log in logs:
            log.close()
            # Shown by pytest for a failing test (captured otherwise).
            print(f"--- {name} log (last 30 lines)\n" + "\n".join(path.read_text().splitlines()[-30:]))


def ctl(entity, param, value):
    c = pb.CtlChange(entity=entity, param=param, source="test_broker")
    c.value.FromDatetime(value)
    return c


# ----------------------------------------------------------------- cases --


def task_chain(s: Stack):
    """A raw hour lands: load_orders runs, and its worker publishes
    dwh.orders/max_dt, which makes dashboard run too."""
    loaded = datetime(2024, 5, 1, 20, 0, tzinfo=timezone.utc)
    s.produce("ctl", "raw.orders/max_dt", ctl("raw.orders", "max_dt", loaded))
    want = loaded.strftime("%Y-%m-%dT%H:%M:%SZ")
    view = wait_for(
        "load_orders to succeed",
        lambda: (v := s.task("load_orders")) and v["last_seen"].get("raw.orders/max_dt") == want and v,
        procs=s.procs,
    )
    assert view["failures"] == 0
    wait_for(
        "dashboard to succeed on the produced dwh.orders/max_dt",
        lambda: (v := s.task("dashboard")) and v["last_seen"].get("dwh.orders/max_dt") == want,
        procs=s.procs,
    )


def stage_update(s: Stack):
    """A new offer: price runs, and its update and state commit together."""
    change = pb.OfferChange(offer_id="o-1", source="test_broker")
    change.body.update({"status": "draft", "category": "home", "price": 100})
    s.produce("offers", "o-1", change)
    state = s.consume(
        "offer_state",
        pb.OfferState,
        lambda m: m.offer_id == "o-1" and m.cause == "stage:price",
        "the OfferState of price's result",
    )
    body = json_format.MessageToDict(state.body)
    assert body["price_predicted"] == round(100 * 1.08 * 1.1)
    assert json_format.MessageToDict(state.states["price"]) == {"model": 3, "price": 100}
    assert list(state.changed_fields) == ["price_predicted"]


def stage_failure(s: Stack):
    """A handler that raises: Reactor records a failed run with its text."""
    change = pb.OfferChange(offer_id="o-2", source="test_broker")
    change.body.update({"status": "active", "category": "books", "price": -5})
    s.produce("offers", "o-2", change)
    event = s.consume(
        "events",
        pb.Event,
        lambda m: m.kind == "run_failed" and m.offer_id == "o-2",
        "a run_failed event for o-2",
    )
    assert event.stage == "price"
    assert event.error == "ValueError: negative price -5"


def launch(process, key, **params):
    command = pb.Command(launch=pb.Command.Launch(process=process, keys=[key]))
    command.launch.params.update(params)
    return command


def process_chain(s: Stack):
    """A payout launched by command: reserve, send_tx and notify run in
    turn, each seeing the earlier steps' output in its context."""
    s.produce("commands", "u-1", launch("payout", "u-1", amount=5))
    event = s.consume(
        "events",
        pb.Event,
        lambda m: m.kind in ("process_succeeded", "process_failed") and m.key == "u-1",
        "the end of payout for u-1",
    )
    assert event.kind == "process_succeeded", event
    assert event.instance.startswith("payout/u-1#")
    status, body = get(f"{s.admin}/processes/payout/u-1")
    assert status == 200, status
    last = json.loads(body)["record"]["last"]
    assert last["status"] == "succeeded"
    assert last["context"] == {
        "reservation": f"r-{event.instance}",
        "amount": 5,
        "tx": f"tx-{event.instance}-1",
        "notified": True,
    }


def process_failure(s: Stack):
    """A step that raises `Failed`: with no retry left the instance fails,
    and the error names the step's reason."""
    s.produce("commands", "u-2", launch("payout", "u-2", amount=5000))
    event = s.consume(
        "events",
        pb.Event,
        lambda m: m.kind in ("process_succeeded", "process_failed") and m.key == "u-2",
        "the end of payout for u-2",
    )
    assert event.kind == "process_failed", event
    assert event.reason == "step"
    assert "over the limit" in event.error


@dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Stack], None]


CASES = [
    Case("task", task_chain),
    Case("stage", stage_update),
    Case("stage_failure", stage_failure),
    Case("job", process_chain),
    Case("job_failure", process_failure),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reactor_and_the_example_worker(stack, case):
    case.run(stack)
