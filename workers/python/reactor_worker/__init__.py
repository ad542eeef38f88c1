"""Reactor workers in Python.

    from reactor_worker import Worker, StageResult

    worker = Worker(brokers="localhost:9092", group="pricing")

    @worker.stage("price")
    def price(run):
        predicted = round(run.offer["price"] * 1.1)
        return StageResult(update={"price_predicted": predicted}, state={"model": 3})

    worker.run()

See the package README and Reactor's README ("Worker protocol").
"""

from .codec import BadCommand, decode
from .runs import Failed, JobResult, NextJob, Run, StageResult, StageRun, StepRun, TaskRun
from .worker import Reply, Worker

__all__ = [
    "BadCommand",
    "Failed",
    "JobResult",
    "NextJob",
    "Reply",
    "Run",
    "StageResult",
    "StageRun",
    "StepRun",
    "TaskRun",
    "Worker",
    "decode",
]
