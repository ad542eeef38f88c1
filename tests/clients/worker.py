#!/usr/bin/env python3
"""A Reactor worker and CTL producer in Python (confluent-kafka), speaking JSON.

Used by tests/real_broker.rs to prove that a client outside Rust can drive
Reactor: for each value given with --ctl-value it produces a JSON CtlChange,
waits for the run command Reactor dispatches (JSON, `[kafka.formats] runs =
"json"`), and replies with a JSON RunResult keyed by the command's reply_key.
Every run command handled is printed to stdout as one JSON line; diagnostics
go to stderr. Exit status 0 when every CTL value got its run in time.
"""

import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer


def log(*args):
    print("worker.py:", *args, file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--ctl-topic", required=True)
    ap.add_argument("--runs-topic", required=True)
    ap.add_argument("--entity", required=True)
    ap.add_argument("--param", required=True)
    ap.add_argument("--ctl-value", action="append", required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    producer = Producer(
        {
            "bootstrap.servers": args.brokers,
            # Java-compatible key hashing, as Reactor computes shard ownership.
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "acks": "all",
        }
    )
    consumer = Consumer(
        {
            "bootstrap.servers": args.brokers,
            "group.id": args.group,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": True,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
        }
    )
    consumer.subscribe([args.runs_topic])

    def produce(topic, key, value):
        errors = []

        def delivered(err, _msg):
            if err is not None:
                errors.append(err)

        producer.produce(topic, key=key.encode(), value=json.dumps(value).encode(), on_delivery=delivered)
        left = producer.flush(15)
        if left or errors:
            raise SystemExit(f"producing to {topic} failed: {errors or 'not delivered in time'}")

    seen = set()
    try:
        for value in args.ctl_value:
            ctl_key = f"{args.entity}/{args.param}"
            produce(
                args.ctl_topic,
                ctl_key,
                {"entity": args.entity, "param": args.param, "value": value, "source": "worker.py"},
            )
            log("produced CTL", ctl_key, value)
            deadline = time.monotonic() + args.timeout
            run = None
            while run is None:
                if time.monotonic() > deadline:
                    raise SystemExit(f"no run command for CTL value {value} in {args.timeout}s")
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        log("consumer error:", msg.error())
                    continue
                command = json.loads(msg.value())
                if command["run_id"] in seen:
                    continue
                seen.add(command["run_id"])
                run = command
            print(json.dumps(run), flush=True)
            # `pass` is a uint64: a string in proto3 JSON; echoed as it came.
            result = {
                "run_id": run["run_id"],
                "pass": run.get("pass", "0"),
                "reply_key": run["reply_key"],
                "status": "RUN_STATUS_SUCCEEDED",
            }
            produce(run["reply_topic"], run["reply_key"], result)
            log("replied", run["run_id"], "to", run["reply_topic"], "key", run["reply_key"])
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
