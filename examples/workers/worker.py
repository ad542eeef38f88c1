#!/usr/bin/env python3
"""The example worker for examples/dev.toml, on the reactor_worker package.

Tasks: `load_orders` "loads" the raw hour it was given and, as a loader
does, publishes the warehouse parameter it produces (`dwh.orders/max_dt`) to
the CTL topic; `orders_report` and `dashboard` just log what they would
build. Stages: `expire` takes an offer down; `price` predicts a price and
keeps the model version and the price it saw in its state (a negative price
fails the run, to show retries). Jobs: the `payout` process's steps —
`reserve` reserves the amount, `send_tx` sends the transaction with the
reservation from the context, `notify` tells the user (an amount over
1,000 is refused by the RPC node, and the step fails).

    pip install ./workers/python
    python examples/workers/worker.py --brokers localhost:9092

Used by deploy/compose.yaml and by the README's quick start on a real broker.
"""

import argparse
import logging
import os
from datetime import datetime, timezone

from confluent_kafka import Producer

from reactor_worker import Failed, JobResult, StageResult, Worker
from reactor_worker import reactor_pb2 as pb

#: The model version the price stage predicts with (examples/dev.toml re-runs
#: the stage for offers priced by an older one).
MODEL = 3
#: Price factor per category.
FACTORS = {"sport": 0.95, "home": 1.08, "electronics": 0.9, "books": 1.0}

log = logging.getLogger("example-worker")


def build(args) -> Worker:
    worker = Worker(args.brokers, args.group, args.topics)
    ctl = Producer({"bootstrap.servers": args.brokers, "partitioner": "murmur2_random", "enable.idempotence": True})

    def publish_ctl(entity: str, param: str, value: datetime):
        change = pb.CtlChange(entity=entity, param=param, source="example-worker")
        change.value.FromDatetime(value)
        change.changed_at.FromDatetime(datetime.now(timezone.utc))
        errors = []
        ctl.produce(
            args.ctl_topic,
            key=f"{entity}/{param}".encode(),
            value=change.SerializeToString(),
            on_delivery=lambda err, _m: err and errors.append(err),
        )
        if ctl.flush(10) or errors:
            # The run fails and is retried: its output was not published.
            raise Failed(f"publishing {entity}/{param}: {errors or 'not delivered'}")

    @worker.task("load_orders")
    def load_orders(run):
        loaded = run.snapshot["raw.orders/max_dt"]
        log.info("%s: loading raw orders up to %s", run.run_id, loaded.isoformat())
        publish_ctl("dwh.orders", "max_dt", loaded)

    @worker.task("orders_report")
    def orders_report(run):
        log.info("%s: report over %s as %s", run.run_id, run.snapshot, run.params.get("format"))

    @worker.task("dashboard")
    def dashboard(run):
        log.info("%s: dashboard refreshed from %s", run.run_id, sorted(run.snapshot))

    @worker.stage("expire")
    def expire(run):
        log.info("%s: offer %s expires", run.run_id, run.offer_id)
        return StageResult(update={"status": "expired"})

    @worker.stage("price")
    def price(run):
        p = run.offer["price"]
        if p < 0:
            raise ValueError(f"negative price {p}")
        factor = FACTORS.get(run.offer.get("category"), 1.0)
        predicted = round(p * factor * 1.1)
        log.info("%s: offer %s v%d price %s -> %s", run.run_id, run.offer_id, run.version, p, predicted)
        return StageResult(update={"price_predicted": predicted}, state={"model": MODEL, "price": p})

    @worker.job("reserve")
    def reserve(run):
        amount = run.args["amount"]
        log.info("%s: reserving %s for %s", run.run_id, amount, run.key)
        return JobResult(output={"reservation": f"r-{run.instance}", "amount": amount})

    @worker.job("send_tx")
    def send_tx(run):
        if run.context["amount"] > 1000:
            raise Failed(f"RPC node refused {run.context['amount']}: over the limit")
        # Idempotent by instance and step: a step may run more than once.
        tx = f"tx-{run.instance}-{run.step}"
        log.info("%s: sent %s against %s", run.run_id, tx, run.context["reservation"])
        return JobResult(output={"tx": tx})

    @worker.job("notify")
    def notify(run):
        log.info("%s: told %s about %s", run.run_id, run.key, run.context["tx"])
        return JobResult(output={"notified": True})

    return worker


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default=os.environ.get("REACTOR_BROKERS", "localhost:9092"))
    ap.add_argument("--group", default="reactor-example-worker")
    ap.add_argument("--ctl-topic", default="ctl.changes", help="where load_orders publishes dwh.orders/max_dt")
    ap.add_argument(
        "--topic",
        dest="topics",
        action="append",
        help="a run topic to consume (repeatable); default: reactor.runs, stage.expire.runs, stage.price.runs, "
        "job.reserve.runs, job.send_tx.runs, job.notify.runs",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    build(args).run()


if __name__ == "__main__":
    main()
