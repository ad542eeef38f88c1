from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATUS_UNSPECIFIED: _ClassVar[RunStatus]
    RUN_STATUS_SUCCEEDED: _ClassVar[RunStatus]
    RUN_STATUS_FAILED: _ClassVar[RunStatus]

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATE_IDLE: _ClassVar[TaskState]
    TASK_STATE_QUEUED: _ClassVar[TaskState]
    TASK_STATE_RUNNING: _ClassVar[TaskState]
    TASK_STATE_BACKOFF: _ClassVar[TaskState]
    TASK_STATE_PARKED: _ClassVar[TaskState]
    TASK_STATE_DEAD: _ClassVar[TaskState]
    TASK_STATE_PAUSED: _ClassVar[TaskState]

class StagePhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_PHASE_IDLE: _ClassVar[StagePhase]
    STAGE_PHASE_QUEUED: _ClassVar[StagePhase]
    STAGE_PHASE_RUNNING: _ClassVar[StagePhase]
    STAGE_PHASE_BACKOFF: _ClassVar[StagePhase]
    STAGE_PHASE_PARKED: _ClassVar[StagePhase]
    STAGE_PHASE_DEAD: _ClassVar[StagePhase]

class Lane(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LANE_LIVE: _ClassVar[Lane]
    LANE_RESCAN: _ClassVar[Lane]
RUN_STATUS_UNSPECIFIED: RunStatus
RUN_STATUS_SUCCEEDED: RunStatus
RUN_STATUS_FAILED: RunStatus
TASK_STATE_IDLE: TaskState
TASK_STATE_QUEUED: TaskState
TASK_STATE_RUNNING: TaskState
TASK_STATE_BACKOFF: TaskState
TASK_STATE_PARKED: TaskState
TASK_STATE_DEAD: TaskState
TASK_STATE_PAUSED: TaskState
STAGE_PHASE_IDLE: StagePhase
STAGE_PHASE_QUEUED: StagePhase
STAGE_PHASE_RUNNING: StagePhase
STAGE_PHASE_BACKOFF: StagePhase
STAGE_PHASE_PARKED: StagePhase
STAGE_PHASE_DEAD: StagePhase
LANE_LIVE: Lane
LANE_RESCAN: Lane

class CtlChange(_message.Message):
    __slots__ = ("entity", "param", "value", "changed_at", "source")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PARAM_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    entity: str
    param: str
    value: _timestamp_pb2.Timestamp
    changed_at: _timestamp_pb2.Timestamp
    source: str
    def __init__(self, entity: _Optional[str] = ..., param: _Optional[str] = ..., value: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., changed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ...) -> None: ...

class RunCommand(_message.Message):
    __slots__ = ("run_id", "kind", "task", "attempt", "params", "snapshot", "deadline", "reply_topic", "reply_key", "issued_at", "stage", "offer_id", "version", "offer", "state", "process", "key", "instance", "step", "job", "args", "context", "source")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SnapshotEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _timestamp_pb2.Timestamp
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PASS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    REPLY_TOPIC_FIELD_NUMBER: _ClassVar[int]
    REPLY_KEY_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    kind: str
    task: str
    attempt: int
    params: _containers.ScalarMap[str, str]
    snapshot: _containers.MessageMap[str, _timestamp_pb2.Timestamp]
    deadline: _timestamp_pb2.Timestamp
    reply_topic: str
    reply_key: str
    issued_at: _timestamp_pb2.Timestamp
    stage: str
    offer_id: str
    version: int
    offer: _struct_pb2.Struct
    state: _struct_pb2.Value
    process: str
    key: str
    instance: str
    step: int
    job: str
    args: _struct_pb2.Struct
    context: _struct_pb2.Struct
    source: str
    def __init__(self, run_id: _Optional[str] = ..., kind: _Optional[str] = ..., task: _Optional[str] = ..., attempt: _Optional[int] = ..., params: _Optional[_Mapping[str, str]] = ..., snapshot: _Optional[_Mapping[str, _timestamp_pb2.Timestamp]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., reply_topic: _Optional[str] = ..., reply_key: _Optional[str] = ..., issued_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., stage: _Optional[str] = ..., offer_id: _Optional[str] = ..., version: _Optional[int] = ..., offer: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., state: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., process: _Optional[str] = ..., key: _Optional[str] = ..., instance: _Optional[str] = ..., step: _Optional[int] = ..., job: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., source: _Optional[str] = ..., **kwargs) -> None: ...

class RunResult(_message.Message):
    __slots__ = ("run_id", "reply_key", "status", "error", "version", "update", "body", "state", "clear_state", "timer", "clear_timer", "output", "next", "goal_reached")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PASS_FIELD_NUMBER: _ClassVar[int]
    REPLY_KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CLEAR_STATE_FIELD_NUMBER: _ClassVar[int]
    TIMER_FIELD_NUMBER: _ClassVar[int]
    CLEAR_TIMER_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    GOAL_REACHED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reply_key: str
    status: RunStatus
    error: str
    version: int
    update: _struct_pb2.Struct
    body: _struct_pb2.Struct
    state: _struct_pb2.Value
    clear_state: bool
    timer: _timestamp_pb2.Timestamp
    clear_timer: bool
    output: _struct_pb2.Struct
    next: _containers.RepeatedCompositeFieldContainer[NextJob]
    goal_reached: bool
    def __init__(self, run_id: _Optional[str] = ..., reply_key: _Optional[str] = ..., status: _Optional[_Union[RunStatus, str]] = ..., error: _Optional[str] = ..., version: _Optional[int] = ..., update: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., state: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., clear_state: bool = ..., timer: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., clear_timer: bool = ..., output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., next: _Optional[_Iterable[_Union[NextJob, _Mapping]]] = ..., goal_reached: bool = ..., **kwargs) -> None: ...

class NextJob(_message.Message):
    __slots__ = ("job", "params", "position")
    JOB_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    job: str
    params: _struct_pb2.Struct
    position: str
    def __init__(self, job: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., position: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("kind", "task", "at", "run_id", "attempt", "reason", "restarted", "error", "retry_at", "tier", "until", "attempts", "entity", "param", "previous", "value", "last_success", "expect_every", "stage", "offer_id", "version", "computed_from", "current", "field", "runs", "window", "expected", "applied", "checked", "queued", "total", "errors", "done", "process", "key", "instance", "job", "source", "idle_for", "deadline", "op", "partition", "recovered", "finished", "cancelled", "matches", "mode")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PASS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESTARTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PARAM_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_EVERY_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    COMPUTED_FROM_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    CHECKED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    PROCESS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    IDLE_FOR_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    RECOVERED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    task: str
    at: _timestamp_pb2.Timestamp
    run_id: str
    attempt: int
    reason: str
    restarted: bool
    error: str
    retry_at: _timestamp_pb2.Timestamp
    tier: int
    until: _timestamp_pb2.Timestamp
    attempts: int
    entity: str
    param: str
    previous: _timestamp_pb2.Timestamp
    value: _timestamp_pb2.Timestamp
    last_success: _timestamp_pb2.Timestamp
    expect_every: str
    stage: str
    offer_id: str
    version: int
    computed_from: int
    current: int
    field: str
    runs: int
    window: str
    expected: int
    applied: bool
    checked: int
    queued: int
    total: int
    errors: int
    done: bool
    process: str
    key: str
    instance: str
    job: str
    source: str
    idle_for: str
    deadline: _timestamp_pb2.Timestamp
    op: str
    partition: int
    recovered: int
    finished: bool
    cancelled: bool
    matches: _containers.RepeatedCompositeFieldContainer[SearchMatch]
    mode: str
    def __init__(self, kind: _Optional[str] = ..., task: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., run_id: _Optional[str] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ..., restarted: bool = ..., error: _Optional[str] = ..., retry_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., tier: _Optional[int] = ..., until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., attempts: _Optional[int] = ..., entity: _Optional[str] = ..., param: _Optional[str] = ..., previous: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., value: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_success: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expect_every: _Optional[str] = ..., stage: _Optional[str] = ..., offer_id: _Optional[str] = ..., version: _Optional[int] = ..., computed_from: _Optional[int] = ..., current: _Optional[int] = ..., field: _Optional[str] = ..., runs: _Optional[int] = ..., window: _Optional[str] = ..., expected: _Optional[int] = ..., applied: bool = ..., checked: _Optional[int] = ..., queued: _Optional[int] = ..., total: _Optional[int] = ..., errors: _Optional[int] = ..., done: bool = ..., process: _Optional[str] = ..., key: _Optional[str] = ..., instance: _Optional[str] = ..., job: _Optional[str] = ..., source: _Optional[str] = ..., idle_for: _Optional[str] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., op: _Optional[str] = ..., partition: _Optional[int] = ..., recovered: _Optional[int] = ..., finished: bool = ..., cancelled: bool = ..., matches: _Optional[_Iterable[_Union[SearchMatch, _Mapping]]] = ..., mode: _Optional[str] = ..., **kwargs) -> None: ...

class SearchMatch(_message.Message):
    __slots__ = ("kind", "name", "key", "state", "error", "at", "step", "instance", "run_id", "attempt")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    key: str
    state: str
    error: str
    at: _timestamp_pb2.Timestamp
    step: str
    instance: str
    run_id: str
    attempt: int
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., key: _Optional[str] = ..., state: _Optional[str] = ..., error: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., step: _Optional[str] = ..., instance: _Optional[str] = ..., run_id: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("pause", "resume", "set_last", "clear_last", "set_stage_state", "rescan", "unpark_offer", "launch", "submit", "cancel", "reset_key", "search", "recover", "cancel_operation")
    class Pause(_message.Message):
        __slots__ = ("task",)
        TASK_FIELD_NUMBER: _ClassVar[int]
        task: str
        def __init__(self, task: _Optional[str] = ...) -> None: ...
    class Resume(_message.Message):
        __slots__ = ("task",)
        TASK_FIELD_NUMBER: _ClassVar[int]
        task: str
        def __init__(self, task: _Optional[str] = ...) -> None: ...
    class SetLast(_message.Message):
        __slots__ = ("task", "param", "value")
        TASK_FIELD_NUMBER: _ClassVar[int]
        PARAM_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        task: str
        param: str
        value: _timestamp_pb2.Timestamp
        def __init__(self, task: _Optional[str] = ..., param: _Optional[str] = ..., value: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    class ClearLast(_message.Message):
        __slots__ = ("task", "param")
        TASK_FIELD_NUMBER: _ClassVar[int]
        PARAM_FIELD_NUMBER: _ClassVar[int]
        task: str
        param: str
        def __init__(self, task: _Optional[str] = ..., param: _Optional[str] = ...) -> None: ...
    class SetStageState(_message.Message):
        __slots__ = ("offer_id", "stage", "state", "version")
        OFFER_ID_FIELD_NUMBER: _ClassVar[int]
        STAGE_FIELD_NUMBER: _ClassVar[int]
        STATE_FIELD_NUMBER: _ClassVar[int]
        VERSION_FIELD_NUMBER: _ClassVar[int]
        offer_id: str
        stage: str
        state: _struct_pb2.Value
        version: int
        def __init__(self, offer_id: _Optional[str] = ..., stage: _Optional[str] = ..., state: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...
    class Rescan(_message.Message):
        __slots__ = ("stage", "when")
        STAGE_FIELD_NUMBER: _ClassVar[int]
        WHEN_FIELD_NUMBER: _ClassVar[int]
        stage: str
        when: str
        def __init__(self, stage: _Optional[str] = ..., when: _Optional[str] = ...) -> None: ...
    class UnparkOffer(_message.Message):
        __slots__ = ("offer_id",)
        OFFER_ID_FIELD_NUMBER: _ClassVar[int]
        offer_id: str
        def __init__(self, offer_id: _Optional[str] = ...) -> None: ...
    class Launch(_message.Message):
        __slots__ = ("process", "keys", "params", "position", "reset", "source", "task", "task_params")
        class TaskParamsEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        PROCESS_FIELD_NUMBER: _ClassVar[int]
        KEYS_FIELD_NUMBER: _ClassVar[int]
        PARAMS_FIELD_NUMBER: _ClassVar[int]
        POSITION_FIELD_NUMBER: _ClassVar[int]
        RESET_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        TASK_FIELD_NUMBER: _ClassVar[int]
        TASK_PARAMS_FIELD_NUMBER: _ClassVar[int]
        process: str
        keys: _containers.RepeatedScalarFieldContainer[str]
        params: _struct_pb2.Struct
        position: str
        reset: bool
        source: str
        task: str
        task_params: _containers.ScalarMap[str, str]
        def __init__(self, process: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., position: _Optional[str] = ..., reset: bool = ..., source: _Optional[str] = ..., task: _Optional[str] = ..., task_params: _Optional[_Mapping[str, str]] = ...) -> None: ...
    class Submit(_message.Message):
        __slots__ = ("job", "key", "params", "position", "priority")
        JOB_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NUMBER: _ClassVar[int]
        PARAMS_FIELD_NUMBER: _ClassVar[int]
        POSITION_FIELD_NUMBER: _ClassVar[int]
        PRIORITY_FIELD_NUMBER: _ClassVar[int]
        job: str
        key: str
        params: _struct_pb2.Struct
        position: str
        priority: int
        def __init__(self, job: _Optional[str] = ..., key: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., position: _Optional[str] = ..., priority: _Optional[int] = ...) -> None: ...
    class Cancel(_message.Message):
        __slots__ = ("process", "key")
        PROCESS_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NUMBER: _ClassVar[int]
        process: str
        key: str
        def __init__(self, process: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...
    class ResetKey(_message.Message):
        __slots__ = ("process", "key")
        PROCESS_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NUMBER: _ClassVar[int]
        process: str
        key: str
        def __init__(self, process: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...
    class Search(_message.Message):
        __slots__ = ("id", "kind", "name", "key", "state", "error", "since", "until", "step", "limit")
        ID_FIELD_NUMBER: _ClassVar[int]
        KIND_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NUMBER: _ClassVar[int]
        STATE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        SINCE_FIELD_NUMBER: _ClassVar[int]
        UNTIL_FIELD_NUMBER: _ClassVar[int]
        STEP_FIELD_NUMBER: _ClassVar[int]
        LIMIT_FIELD_NUMBER: _ClassVar[int]
        id: str
        kind: str
        name: str
        key: str
        state: str
        error: str
        since: _timestamp_pb2.Timestamp
        until: _timestamp_pb2.Timestamp
        step: str
        limit: int
        def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., key: _Optional[str] = ..., state: _Optional[str] = ..., error: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., step: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...
    class Recover(_message.Message):
        __slots__ = ("id", "kind", "name", "key", "state", "error", "since", "until", "step", "from_start", "from_step", "retry", "dry_run")
        ID_FIELD_NUMBER: _ClassVar[int]
        KIND_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        KEY_FIELD_NUMBER: _ClassVar[int]
        STATE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        SINCE_FIELD_NUMBER: _ClassVar[int]
        UNTIL_FIELD_NUMBER: _ClassVar[int]
        STEP_FIELD_NUMBER: _ClassVar[int]
        FROM_START_FIELD_NUMBER: _ClassVar[int]
        FROM_STEP_FIELD_NUMBER: _ClassVar[int]
        RETRY_FIELD_NUMBER: _ClassVar[int]
        DRY_RUN_FIELD_NUMBER: _ClassVar[int]
        id: str
        kind: str
        name: str
        key: str
        state: str
        error: str
        since: _timestamp_pb2.Timestamp
        until: _timestamp_pb2.Timestamp
        step: str
        from_start: bool
        from_step: str
        retry: bool
        dry_run: bool
        def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., key: _Optional[str] = ..., state: _Optional[str] = ..., error: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., step: _Optional[str] = ..., from_start: bool = ..., from_step: _Optional[str] = ..., retry: bool = ..., dry_run: bool = ...) -> None: ...
    class CancelOperation(_message.Message):
        __slots__ = ("id",)
        ID_FIELD_NUMBER: _ClassVar[int]
        id: str
        def __init__(self, id: _Optional[str] = ...) -> None: ...
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    SET_LAST_FIELD_NUMBER: _ClassVar[int]
    CLEAR_LAST_FIELD_NUMBER: _ClassVar[int]
    SET_STAGE_STATE_FIELD_NUMBER: _ClassVar[int]
    RESCAN_FIELD_NUMBER: _ClassVar[int]
    UNPARK_OFFER_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RESET_KEY_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    RECOVER_FIELD_NUMBER: _ClassVar[int]
    CANCEL_OPERATION_FIELD_NUMBER: _ClassVar[int]
    pause: Command.Pause
    resume: Command.Resume
    set_last: Command.SetLast
    clear_last: Command.ClearLast
    set_stage_state: Command.SetStageState
    rescan: Command.Rescan
    unpark_offer: Command.UnparkOffer
    launch: Command.Launch
    submit: Command.Submit
    cancel: Command.Cancel
    reset_key: Command.ResetKey
    search: Command.Search
    recover: Command.Recover
    cancel_operation: Command.CancelOperation
    def __init__(self, pause: _Optional[_Union[Command.Pause, _Mapping]] = ..., resume: _Optional[_Union[Command.Resume, _Mapping]] = ..., set_last: _Optional[_Union[Command.SetLast, _Mapping]] = ..., clear_last: _Optional[_Union[Command.ClearLast, _Mapping]] = ..., set_stage_state: _Optional[_Union[Command.SetStageState, _Mapping]] = ..., rescan: _Optional[_Union[Command.Rescan, _Mapping]] = ..., unpark_offer: _Optional[_Union[Command.UnparkOffer, _Mapping]] = ..., launch: _Optional[_Union[Command.Launch, _Mapping]] = ..., submit: _Optional[_Union[Command.Submit, _Mapping]] = ..., cancel: _Optional[_Union[Command.Cancel, _Mapping]] = ..., reset_key: _Optional[_Union[Command.ResetKey, _Mapping]] = ..., search: _Optional[_Union[Command.Search, _Mapping]] = ..., recover: _Optional[_Union[Command.Recover, _Mapping]] = ..., cancel_operation: _Optional[_Union[Command.CancelOperation, _Mapping]] = ...) -> None: ...

class RunRecord(_message.Message):
    __slots__ = ("run_id", "attempt", "dispatched_at", "deadline")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PASS_FIELD_NUMBER: _ClassVar[int]
    DISPATCHED_AT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    attempt: int
    dispatched_at: _timestamp_pb2.Timestamp
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, run_id: _Optional[str] = ..., attempt: _Optional[int] = ..., dispatched_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., **kwargs) -> None: ...

class Hold(_message.Message):
    __slots__ = ("until", "awaiting_data")
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    AWAITING_DATA_FIELD_NUMBER: _ClassVar[int]
    until: _timestamp_pb2.Timestamp
    awaiting_data: bool
    def __init__(self, until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., awaiting_data: bool = ...) -> None: ...

class TaskRecord(_message.Message):
    __slots__ = ("state", "since", "queued_at", "wake_at", "failures", "run_seq", "pass_seq", "run", "snapshot", "last_seen", "last_success", "sla_due", "hold", "pause_requested", "last_error", "launch", "again", "cron_at", "failed_at", "source")
    class SnapshotEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _timestamp_pb2.Timestamp
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    class LastSeenEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _timestamp_pb2.Timestamp
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    STATE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    QUEUED_AT_FIELD_NUMBER: _ClassVar[int]
    WAKE_AT_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    RUN_SEQ_FIELD_NUMBER: _ClassVar[int]
    PASS_SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    SLA_DUE_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    PAUSE_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_FIELD_NUMBER: _ClassVar[int]
    AGAIN_FIELD_NUMBER: _ClassVar[int]
    CRON_AT_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    state: TaskState
    since: _timestamp_pb2.Timestamp
    queued_at: _timestamp_pb2.Timestamp
    wake_at: _timestamp_pb2.Timestamp
    failures: int
    run_seq: int
    pass_seq: int
    run: RunRecord
    snapshot: _containers.MessageMap[str, _timestamp_pb2.Timestamp]
    last_seen: _containers.MessageMap[str, _timestamp_pb2.Timestamp]
    last_success: _timestamp_pb2.Timestamp
    sla_due: _timestamp_pb2.Timestamp
    hold: Hold
    pause_requested: bool
    last_error: str
    launch: LaunchParams
    again: LaunchParams
    cron_at: _timestamp_pb2.Timestamp
    failed_at: _timestamp_pb2.Timestamp
    source: str
    def __init__(self, state: _Optional[_Union[TaskState, str]] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., queued_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., wake_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., failures: _Optional[int] = ..., run_seq: _Optional[int] = ..., pass_seq: _Optional[int] = ..., run: _Optional[_Union[RunRecord, _Mapping]] = ..., snapshot: _Optional[_Mapping[str, _timestamp_pb2.Timestamp]] = ..., last_seen: _Optional[_Mapping[str, _timestamp_pb2.Timestamp]] = ..., last_success: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., sla_due: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., hold: _Optional[_Union[Hold, _Mapping]] = ..., pause_requested: bool = ..., last_error: _Optional[str] = ..., launch: _Optional[_Union[LaunchParams, _Mapping]] = ..., again: _Optional[_Union[LaunchParams, _Mapping]] = ..., cron_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., failed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ...) -> None: ...

class LaunchParams(_message.Message):
    __slots__ = ("params",)
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    params: _containers.ScalarMap[str, str]
    def __init__(self, params: _Optional[_Mapping[str, str]] = ...) -> None: ...

class OfferChange(_message.Message):
    __slots__ = ("offer_id", "body", "patch", "deleted", "source", "changed_at")
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    body: _struct_pb2.Struct
    patch: _struct_pb2.Struct
    deleted: bool
    source: str
    changed_at: _timestamp_pb2.Timestamp
    def __init__(self, offer_id: _Optional[str] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., patch: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deleted: bool = ..., source: _Optional[str] = ..., changed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class OfferState(_message.Message):
    __slots__ = ("offer_id", "version", "body", "cause", "changed_fields", "states", "deleted", "committed_at")
    class StatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    OFFER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    offer_id: str
    version: int
    body: _struct_pb2.Struct
    cause: str
    changed_fields: _containers.RepeatedScalarFieldContainer[str]
    states: _containers.MessageMap[str, _struct_pb2.Value]
    deleted: bool
    committed_at: _timestamp_pb2.Timestamp
    def __init__(self, offer_id: _Optional[str] = ..., version: _Optional[int] = ..., body: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., cause: _Optional[str] = ..., changed_fields: _Optional[_Iterable[str]] = ..., states: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., deleted: bool = ..., committed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class OfferRecord(_message.Message):
    __slots__ = ("version", "body_json", "updated_at", "stages", "guard", "deleted")
    class SlotRecord(_message.Message):
        __slots__ = ("phase", "state_json", "timer", "lane", "queued_at", "run", "run_version", "run_seq", "pass_seq", "failures", "wake_at", "last_error", "failed_at", "source")
        PHASE_FIELD_NUMBER: _ClassVar[int]
        STATE_JSON_FIELD_NUMBER: _ClassVar[int]
        TIMER_FIELD_NUMBER: _ClassVar[int]
        LANE_FIELD_NUMBER: _ClassVar[int]
        QUEUED_AT_FIELD_NUMBER: _ClassVar[int]
        RUN_FIELD_NUMBER: _ClassVar[int]
        RUN_VERSION_FIELD_NUMBER: _ClassVar[int]
        RUN_SEQ_FIELD_NUMBER: _ClassVar[int]
        PASS_SEQ_FIELD_NUMBER: _ClassVar[int]
        FAILURES_FIELD_NUMBER: _ClassVar[int]
        WAKE_AT_FIELD_NUMBER: _ClassVar[int]
        LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
        FAILED_AT_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        phase: StagePhase
        state_json: bytes
        timer: _timestamp_pb2.Timestamp
        lane: Lane
        queued_at: _timestamp_pb2.Timestamp
        run: RunRecord
        run_version: int
        run_seq: int
        pass_seq: int
        failures: int
        wake_at: _timestamp_pb2.Timestamp
        last_error: str
        failed_at: _timestamp_pb2.Timestamp
        source: str
        def __init__(self, phase: _Optional[_Union[StagePhase, str]] = ..., state_json: _Optional[bytes] = ..., timer: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., lane: _Optional[_Union[Lane, str]] = ..., queued_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., run: _Optional[_Union[RunRecord, _Mapping]] = ..., run_version: _Optional[int] = ..., run_seq: _Optional[int] = ..., pass_seq: _Optional[int] = ..., failures: _Optional[int] = ..., wake_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., failed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ...) -> None: ...
    class Guard(_message.Message):
        __slots__ = ("window_start", "runs", "parked_until")
        WINDOW_START_FIELD_NUMBER: _ClassVar[int]
        RUNS_FIELD_NUMBER: _ClassVar[int]
        PARKED_UNTIL_FIELD_NUMBER: _ClassVar[int]
        window_start: _timestamp_pb2.Timestamp
        runs: int
        parked_until: _timestamp_pb2.Timestamp
        def __init__(self, window_start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., runs: _Optional[int] = ..., parked_until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    class StagesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: OfferRecord.SlotRecord
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[OfferRecord.SlotRecord, _Mapping]] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BODY_JSON_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    GUARD_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    version: int
    body_json: bytes
    updated_at: _timestamp_pb2.Timestamp
    stages: _containers.MessageMap[str, OfferRecord.SlotRecord]
    guard: OfferRecord.Guard
    deleted: bool
    def __init__(self, version: _Optional[int] = ..., body_json: _Optional[bytes] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., stages: _Optional[_Mapping[str, OfferRecord.SlotRecord]] = ..., guard: _Optional[_Union[OfferRecord.Guard, _Mapping]] = ..., deleted: bool = ...) -> None: ...

class RescanRecord(_message.Message):
    __slots__ = ("filter", "cursor", "checked", "queued", "total", "errors", "started_at")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    CHECKED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    filter: str
    cursor: str
    checked: int
    queued: int
    total: int
    errors: int
    started_at: _timestamp_pb2.Timestamp
    def __init__(self, filter: _Optional[str] = ..., cursor: _Optional[str] = ..., checked: _Optional[int] = ..., queued: _Optional[int] = ..., total: _Optional[int] = ..., errors: _Optional[int] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class KeyRecord(_message.Message):
    __slots__ = ("active", "waiting", "last", "goal")
    class Placement(_message.Message):
        __slots__ = ("lane", "priority", "order")
        LANE_FIELD_NUMBER: _ClassVar[int]
        PRIORITY_FIELD_NUMBER: _ClassVar[int]
        ORDER_FIELD_NUMBER: _ClassVar[int]
        lane: int
        priority: int
        order: int
        def __init__(self, lane: _Optional[int] = ..., priority: _Optional[int] = ..., order: _Optional[int] = ...) -> None: ...
    class Step(_message.Message):
        __slots__ = ("job", "params_json")
        JOB_FIELD_NUMBER: _ClassVar[int]
        PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
        job: str
        params_json: bytes
        def __init__(self, job: _Optional[str] = ..., params_json: _Optional[bytes] = ...) -> None: ...
    class Instance(_message.Message):
        __slots__ = ("n", "params_json", "context_json", "chain", "step", "phase", "run_seq", "pass_seq", "failures", "run", "wake_at", "last_error", "queued", "step_deadline", "overdue", "priority", "lane", "started_at", "progress_at", "source", "failed_at", "runs", "seq_base")
        N_FIELD_NUMBER: _ClassVar[int]
        PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
        CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
        CHAIN_FIELD_NUMBER: _ClassVar[int]
        STEP_FIELD_NUMBER: _ClassVar[int]
        PHASE_FIELD_NUMBER: _ClassVar[int]
        RUN_SEQ_FIELD_NUMBER: _ClassVar[int]
        PASS_SEQ_FIELD_NUMBER: _ClassVar[int]
        FAILURES_FIELD_NUMBER: _ClassVar[int]
        RUN_FIELD_NUMBER: _ClassVar[int]
        WAKE_AT_FIELD_NUMBER: _ClassVar[int]
        LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
        QUEUED_FIELD_NUMBER: _ClassVar[int]
        STEP_DEADLINE_FIELD_NUMBER: _ClassVar[int]
        OVERDUE_FIELD_NUMBER: _ClassVar[int]
        PRIORITY_FIELD_NUMBER: _ClassVar[int]
        LANE_FIELD_NUMBER: _ClassVar[int]
        STARTED_AT_FIELD_NUMBER: _ClassVar[int]
        PROGRESS_AT_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        FAILED_AT_FIELD_NUMBER: _ClassVar[int]
        RUNS_FIELD_NUMBER: _ClassVar[int]
        SEQ_BASE_FIELD_NUMBER: _ClassVar[int]
        n: int
        params_json: bytes
        context_json: bytes
        chain: _containers.RepeatedCompositeFieldContainer[KeyRecord.Step]
        step: int
        phase: StagePhase
        run_seq: int
        pass_seq: int
        failures: int
        run: RunRecord
        wake_at: _timestamp_pb2.Timestamp
        last_error: str
        queued: KeyRecord.Placement
        step_deadline: _timestamp_pb2.Timestamp
        overdue: bool
        priority: int
        lane: int
        started_at: _timestamp_pb2.Timestamp
        progress_at: _timestamp_pb2.Timestamp
        source: str
        failed_at: _timestamp_pb2.Timestamp
        runs: int
        seq_base: int
        def __init__(self, n: _Optional[int] = ..., params_json: _Optional[bytes] = ..., context_json: _Optional[bytes] = ..., chain: _Optional[_Iterable[_Union[KeyRecord.Step, _Mapping]]] = ..., step: _Optional[int] = ..., phase: _Optional[_Union[StagePhase, str]] = ..., run_seq: _Optional[int] = ..., pass_seq: _Optional[int] = ..., failures: _Optional[int] = ..., run: _Optional[_Union[RunRecord, _Mapping]] = ..., wake_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., queued: _Optional[_Union[KeyRecord.Placement, _Mapping]] = ..., step_deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., overdue: bool = ..., priority: _Optional[int] = ..., lane: _Optional[int] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., progress_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ..., failed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., runs: _Optional[int] = ..., seq_base: _Optional[int] = ...) -> None: ...
    class Launch(_message.Message):
        __slots__ = ("params_json", "position", "lane", "priority", "reset", "source", "at")
        PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
        POSITION_FIELD_NUMBER: _ClassVar[int]
        LANE_FIELD_NUMBER: _ClassVar[int]
        PRIORITY_FIELD_NUMBER: _ClassVar[int]
        RESET_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        AT_FIELD_NUMBER: _ClassVar[int]
        params_json: bytes
        position: str
        lane: int
        priority: int
        reset: bool
        source: str
        at: _timestamp_pb2.Timestamp
        def __init__(self, params_json: _Optional[bytes] = ..., position: _Optional[str] = ..., lane: _Optional[int] = ..., priority: _Optional[int] = ..., reset: bool = ..., source: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    class Outcome(_message.Message):
        __slots__ = ("n", "status", "finished_at", "context_json", "error", "instance")
        N_FIELD_NUMBER: _ClassVar[int]
        STATUS_FIELD_NUMBER: _ClassVar[int]
        FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
        CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        INSTANCE_FIELD_NUMBER: _ClassVar[int]
        n: int
        status: str
        finished_at: _timestamp_pb2.Timestamp
        context_json: bytes
        error: str
        instance: KeyRecord.Instance
        def __init__(self, n: _Optional[int] = ..., status: _Optional[str] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., context_json: _Optional[bytes] = ..., error: _Optional[str] = ..., instance: _Optional[_Union[KeyRecord.Instance, _Mapping]] = ...) -> None: ...
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    active: KeyRecord.Instance
    waiting: _containers.RepeatedCompositeFieldContainer[KeyRecord.Launch]
    last: KeyRecord.Outcome
    goal: bool
    def __init__(self, active: _Optional[_Union[KeyRecord.Instance, _Mapping]] = ..., waiting: _Optional[_Iterable[_Union[KeyRecord.Launch, _Mapping]]] = ..., last: _Optional[_Union[KeyRecord.Outcome, _Mapping]] = ..., goal: bool = ...) -> None: ...

class ScheduleRecord(_message.Message):
    __slots__ = ("last_fire", "next_key", "scanning", "after_offer", "launched")
    LAST_FIRE_FIELD_NUMBER: _ClassVar[int]
    NEXT_KEY_FIELD_NUMBER: _ClassVar[int]
    SCANNING_FIELD_NUMBER: _ClassVar[int]
    AFTER_OFFER_FIELD_NUMBER: _ClassVar[int]
    LAUNCHED_FIELD_NUMBER: _ClassVar[int]
    last_fire: _timestamp_pb2.Timestamp
    next_key: int
    scanning: bool
    after_offer: str
    launched: int
    def __init__(self, last_fire: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., next_key: _Optional[int] = ..., scanning: bool = ..., after_offer: _Optional[str] = ..., launched: _Optional[int] = ...) -> None: ...

class RecoveryRecord(_message.Message):
    __slots__ = ("command", "cursor_kind", "cursor_name", "cursor_key", "done", "total", "started_at")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    CURSOR_KIND_FIELD_NUMBER: _ClassVar[int]
    CURSOR_NAME_FIELD_NUMBER: _ClassVar[int]
    CURSOR_KEY_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    command: Command.Recover
    cursor_kind: str
    cursor_name: str
    cursor_key: str
    done: int
    total: int
    started_at: _timestamp_pb2.Timestamp
    def __init__(self, command: _Optional[_Union[Command.Recover, _Mapping]] = ..., cursor_kind: _Optional[str] = ..., cursor_name: _Optional[str] = ..., cursor_key: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SeqRecord(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...
