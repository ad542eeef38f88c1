"""The worker loop: consume run commands, call the handler registered for
the run's task, stage or job, reply, and commit.

The part of Reactor's worker protocol every worker repeats, written once:

- the reply echoes ``run_id``, ``pass`` and ``reply_key`` (and a stage's
  ``version``), goes to the command's ``reply_topic`` keyed by ``reply_key``,
  through librdkafka's murmur2 partitioner (as Java clients and Reactor
  hash), so it reaches the partition that owns the run;
- a command's offset is committed only after its reply is delivered: a
  worker that dies in between handles the command again (keep handlers
  idempotent, keyed by ``run_id`` or by what the run carries);
- a command past its ``deadline`` is skipped and logged: Reactor stopped
  waiting for that pass (it re-dispatches the run under a new pass or counts
  the attempt as failed);
- a handler that raises fails the run with the error text;
- a reply that cannot be delivered is sent again (the handler does not run
  twice for it); a worker stopped meanwhile leaves the offset uncommitted;
- commands for targets this worker has no handler for are skipped (another
  worker group may serve them), as are undecodable records; both are logged.

One command at a time per process, in partition order. For more
parallelism run more processes in the same group (up to the run topics'
partition count).
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Optional

from . import codec
from .runs import Failed, Run, StageRun, StepRun, TaskRun

log = logging.getLogger("reactor_worker")

Handler = Callable[[Any], Any]

#: Time to wait after a reply could not be delivered, before it is sent
#: again.
RETRY_BACKOFF = 1.0

#: W3C trace-context headers copied from a run command to its reply, so
#: that a trace goes on through the worker into what Reactor does next.
TRACE_HEADERS = ("traceparent", "tracestate")


@dataclass(frozen=True)
class Reply:
    """A result record ready to produce."""

    topic: str
    key: str
    value: bytes
    run: Run
    #: The run failed (the result says why).
    failed: bool
    #: Headers of the reply: the command's trace context.
    headers: tuple = ()


class Worker:
    """A Reactor worker. Register handlers with :meth:`task`, :meth:`stage`
    and :meth:`job`, then call :meth:`run`.

    ``topics``: the run topics to consume; by default ``reactor.runs`` when
    there is a task handler, ``stage.NAME.runs`` per stage and
    ``job.NAME.runs`` per job (Reactor's default topic names). ``config``:
    librdkafka settings for both clients (security, timeouts …), e.g.
    ``{"security.protocol": "SASL_SSL", …}``.
    """

    def __init__(
        self,
        brokers: str,
        group: str,
        topics: Optional[Iterable[str]] = None,
        *,
        config: Optional[dict[str, Any]] = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        poll_timeout: float = 0.5,
    ):
        self.brokers = brokers
        self.group = group
        self._topics = list(topics) if topics is not None else None
        self._config = dict(config or {})
        self._clock = clock
        self._poll_timeout = poll_timeout
        self._handlers: dict[tuple[str, str], Handler] = {}
        self._stop = threading.Event()

    # ------------------------------------------------------------ handlers --

    def _register(self, kind: str, name: str) -> Callable[[Handler], Handler]:
        if not name:
            raise ValueError(f"a {kind} handler needs a name")

        def register(fn: Handler) -> Handler:
            if (kind, name) in self._handlers:
                raise ValueError(f"two handlers for {kind} {name!r}")
            self._handlers[(kind, name)] = fn
            return fn

        return register

    def task(self, task_id: str) -> Callable[[Handler], Handler]:
        """Registers ``fn(run: TaskRun) -> None`` for the task ``task_id``."""
        return self._register("task", task_id)

    def stage(self, name: str) -> Callable[[Handler], Handler]:
        """Registers ``fn(run: StageRun) -> StageResult | None`` for a stage."""
        return self._register("stage", name)

    def job(self, name: str) -> Callable[[Handler], Handler]:
        """Registers ``fn(run: StepRun) -> JobResult | None`` for a job: the
        steps of processes that run it and the job submitted alone."""
        return self._register("step", name)

    @property
    def topics(self) -> list[str]:
        """The run topics this worker consumes."""
        if self._topics is not None:
            return self._topics
        topics = []
        if any(kind == "task" for kind, _ in self._handlers):
            topics.append("reactor.runs")
        topics += [f"stage.{n}.runs" for kind, n in self._handlers if kind == "stage"]
        topics += [f"job.{n}.runs" for kind, n in self._handlers if kind == "step"]
        return topics

    # ------------------------------------------------------- one command --

    def handle(self, value: Optional[bytes], headers=None, where: str = "") -> Optional[Reply]:
        """Handles one record of a run topic: the reply to produce, or None
        when there is nothing to answer (undecodable, past its deadline, no
        handler). Never raises for what a record or a handler does."""
        try:
            run = codec.decode(value, headers)
        except codec.BadCommand as e:
            log.error("skipping a record%s: %s", where, e)
            return None
        target = _target(run)
        handler = self._handlers.get((run.kind, target))
        if handler is None:
            log.warning("skipping %s: no handler for %s %r%s", run.run_id, run.kind, target, where)
            return None
        now = self._clock()
        if run.deadline is not None and now > run.deadline:
            log.warning(
                "skipping %s pass %d: its deadline %s has passed (now %s)",
                run.run_id,
                run.pass_,
                run.deadline.isoformat(),
                now.isoformat(),
            )
            return None
        error = None
        outcome = None
        try:
            outcome = handler(run)
        except Failed as e:
            error = str(e) or "failed"
        except Exception as e:  # noqa: BLE001 - every handler error fails the run
            error = f"{type(e).__name__}: {e}"
            log.exception("%s failed", run.run_id)
        try:
            result = codec.result(run, outcome, error)
        except Exception as e:  # noqa: BLE001 - what a handler returned cannot be sent
            error = f"{type(e).__name__}: {e}"
            log.error("%s: %s", run.run_id, error)
            result = codec.result(run, None, error)
        value_out = codec.encode(result, as_json=codec.is_json(value or b""))
        trace = tuple((k, v) for k, v in run.headers if k in TRACE_HEADERS)
        return Reply(run.reply_topic, run.reply_key, value_out, run, failed=error is not None, headers=trace)

    # -------------------------------------------------------------- loop --

    def consumer_config(self) -> dict[str, Any]:
        """The consumer's settings: offsets are stored by hand once a reply
        is delivered, and committed (automatically) from the store."""
        return {
            "bootstrap.servers": self.brokers,
            "group.id": self.group,
            "auto.offset.reset": "earliest",
            # Reactor writes run commands in transactions: only committed ones.
            "isolation.level": "read_committed",
            "enable.auto.commit": True,
            "enable.auto.offset.store": False,
            **self._config,
        }

    def producer_config(self) -> dict[str, Any]:
        """The producer's settings: Java-compatible key hashing, idempotent."""
        return {
            "bootstrap.servers": self.brokers,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            **self._config,
        }

    def stop(self):
        """Asks :meth:`run` to return after the command in hand."""
        self._stop.set()

    def run(self, install_signal_handlers: bool = True):
        """Consumes and answers run commands until :meth:`stop` (or SIGTERM /
        SIGINT, when called from the main thread; a second one ends the
        process at once)."""
        from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

        if not self._handlers:
            raise ValueError("no handlers registered")
        if install_signal_handlers and threading.current_thread() is threading.main_thread():

            def on_signal(signum, _frame):
                self.stop()
                # A second signal ends the process at once: leaving the group
                # can take a session timeout when the brokers are gone.
                for sig in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)

            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, on_signal)
        consumer = Consumer(self.consumer_config(), logger=log)
        producer = Producer(self.producer_config(), logger=log)
        topics = self.topics
        consumer.subscribe(topics)
        log.info("worker %s consuming %s from %s", self.group, ", ".join(topics), self.brokers)
        try:
            while not self._stop.is_set():
                msg = consumer.poll(self._poll_timeout)
                producer.poll(0)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("consumer: %s", msg.error())
                        if msg.error().fatal():
                            raise KafkaException(msg.error())
                    continue
                where = f" ({msg.topic()}[{msg.partition()}]@{msg.offset()})"
                reply = self.handle(msg.value(), msg.headers(), where)
                if reply is not None:
                    if not self._deliver(producer, reply):
                        # Stopped before the reply was delivered: its offset
                        # stays uncommitted, the next owner handles it again.
                        break
                    log.info(
                        "%s pass %d %s",
                        reply.run.run_id,
                        reply.run.pass_,
                        "failed" if reply.failed else "succeeded",
                    )
                consumer.store_offsets(message=msg)
        finally:
            producer.flush(10)
            # Commits the stored offsets before leaving the group.
            consumer.close()
            log.info("worker %s stopped", self.group)


    def _deliver(self, producer, reply: Reply) -> bool:
        """Produces the reply until the broker has it (True), or until
        :meth:`stop` (False)."""
        while True:
            outcome: list = []
            producer.produce(
                reply.topic,
                key=reply.key.encode(),
                value=reply.value,
                headers=list(reply.headers),
                on_delivery=lambda err, _msg: outcome.append(err),
            )
            # The delivery report arrives once librdkafka gives up retrying
            # at the latest (delivery.timeout.ms); flush serves it.
            while not outcome:
                producer.flush(1.0)
            if outcome[0] is None:
                return True
            log.error("reply to %s not delivered: %s; sending it again", reply.run.run_id, outcome[0])
            if self._stop.wait(RETRY_BACKOFF):
                return False


def _target(run: Run) -> str:
    if isinstance(run, TaskRun):
        return run.task
    if isinstance(run, StageRun):
        return run.stage
    if isinstance(run, StepRun):
        return run.job
    raise AssertionError(run.kind)


