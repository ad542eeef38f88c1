"""What a handler receives (a run) and what it may return (a result).

A run is one ``RunCommand`` of ``schemas/reactor.proto`` decoded: a
:class:`TaskRun`, a :class:`StageRun` or a :class:`StepRun` (a process step
or a submitted job). JSON objects (an offer, a stage's state, a step's args
and context) are plain Python values; an integral number is an ``int``, as
Reactor reads it, whether the command came as protobuf or as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional


class Failed(Exception):
    """Raise it from a handler to fail the run with exactly this message.

    Any other exception fails the run too, with ``Type: message`` as its
    error text. Reactor's retry policy then decides what comes next.
    """


@dataclass(frozen=True, kw_only=True)
class Run:
    """What every run carries."""

    #: ``TARGET#SEQ``; the same across re-dispatches of one run.
    run_id: str
    #: ``task``, ``stage`` or ``step``.
    kind: str
    #: Try number since the target's last success, from 1.
    attempt: int
    #: The pass token (``pass`` on the wire); the reply echoes it.
    pass_: int
    #: Reactor stops waiting for this pass then; None if the command had none.
    deadline: Optional[datetime]
    #: When Reactor sent the command.
    issued_at: Optional[datetime]
    #: Where the reply goes, and its key.
    reply_topic: str
    reply_key: str
    #: What caused the run: empty for live work, ``auto``, or ``op:ID``.
    source: str = ""
    #: The Kafka headers of the command record, in order.
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, kw_only=True)
class TaskRun(Run):
    """A run of a CTL-triggered task."""

    #: The task id.
    task: str
    #: The task's ``params``.
    params: dict[str, str] = field(default_factory=dict)
    #: The trigger's CTL values at dispatch, keyed ``entity/param``: what the
    #: run should process (recorded as last-seen when it succeeds).
    snapshot: dict[str, datetime] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class StageRun(Run):
    """A run of an offer stage."""

    #: The stage name.
    stage: str
    #: The offer id (also the reply key).
    offer_id: str
    #: The offer version the run works on (echoed in the reply).
    version: int
    #: The offer body at ``version``.
    offer: dict[str, Any] = field(default_factory=dict)
    #: The stage's state for the offer; None when it has none.
    state: Any = None


@dataclass(frozen=True, kw_only=True)
class StepRun(Run):
    """A step of a process instance, or a job submitted alone."""

    #: The process (for a job submitted alone: the job's name).
    process: str
    #: The business key (also the reply key).
    key: str
    #: ``PROCESS/KEY#N``.
    instance: str
    #: Index of the step in the instance's chain, from 0.
    step: int
    #: The job this step runs: the handler's name.
    job: str
    #: The instance's launch parameters.
    args: dict[str, Any] = field(default_factory=dict)
    #: Every earlier step's ``output`` merged.
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StageResult:
    """A stage's success: what to change on the offer, all in one commit.

    ``update`` is a JSON merge patch (a None member removes the field);
    ``body`` replaces the whole body (at most one of the two). ``state``
    replaces the stage's state unless None; ``clear_state`` clears it.
    ``timer`` sets the stage's wake-up for the offer (an aware datetime);
    ``clear_timer`` cancels it. Returning None from a stage handler succeeds
    and changes nothing.
    """

    update: Optional[dict[str, Any]] = None
    body: Optional[dict[str, Any]] = None
    state: Any = None
    clear_state: bool = False
    timer: Optional[datetime] = None
    clear_timer: bool = False

    def __post_init__(self):
        if self.update is not None and self.body is not None:
            raise ValueError("StageResult: at most one of update and body")
        if self.clear_state and self.state is not None:
            raise ValueError("StageResult: state and clear_state together")
        if self.clear_timer and self.timer is not None:
            raise ValueError("StageResult: timer and clear_timer together")
        if self.timer is not None and self.timer.tzinfo is None:
            raise ValueError("StageResult: timer must be an aware datetime")


@dataclass(frozen=True)
class NextJob:
    """A job a step adds to its own instance's chain."""

    job: str
    #: Parameters of that step; None: the instance's.
    params: Optional[dict[str, Any]] = None
    #: ``front`` (right after this step) or ``back`` (after the last step).
    position: str = "back"

    def __post_init__(self):
        if self.position not in ("front", "back"):
            raise ValueError(f"NextJob: position must be 'front' or 'back', not {self.position!r}")


@dataclass(frozen=True)
class JobResult:
    """A step's success: its output and follow-ups. Returning None from a
    job handler succeeds with neither."""

    #: Merged into the instance's context (and passed to later steps).
    output: Optional[dict[str, Any]] = None
    #: Jobs added to this instance's chain, in order.
    next: tuple[NextJob, ...] = ()
    #: The key's goal is reached (for ``reuse = "until_reset"``).
    goal_reached: bool = False
