"""Records and closed sets: read-only ``Record``s (``record``); the store and the executors
speak in these. Each record's ``__new__`` takes its fields in the order of ``__slots__``."""

from __future__ import annotations

import json
from enum import StrEnum

from .record import Record, _draft, _seal

TYPE_CHECKING = False  # typing costs `awty add` ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from datetime import datetime
    from typing import Any, final
else:
    def final(cls: type) -> type:  # typing.final, for mypy only: nothing to do at run time
        return cls


class Kind(StrEnum):
    HTTP = "http"
    EXEC = "exec"
    PYTHON = "python"


ALL_KINDS = frozenset(k.value for k in Kind)


class Status(StrEnum):
    PENDING = "pending"
    IN_FLIGHT = "in_flight"


class Outcome(StrEnum):
    """How a job ended (a row in ``job_history``)."""

    DONE = "done"
    GONE = "gone"
    CANCELLED = "cancelled"
    FAILED = "failed"
    EXPIRED = "expired"
    # A schedule's occurrences that did not fire (missed while runners were stopped, by the
    # schedule's ``--missed`` policy): one row says how many and why, never silence.
    SKIPPED = "skipped"


class Answer(StrEnum):
    """What one execution of a job answered (the article's ``job_exec`` return, widened)."""

    DONE = "done"  # finished: end the job
    RECHECK = "recheck"  # "not yet": check again at Result.recheck_at
    GONE = "gone"  # the entity no longer needs checking: end the job, not a failure
    RETRY = "retry"  # a failure worth retrying (timeout, connection error, 5xx, exit != 0)
    FAIL = "fail"  # a failure not worth retrying (4xx, bad target)


class MisfirePolicy(StrEnum):
    FIRE = "fire"
    SKIP = "skip"


class Job(Record):
    __slots__ = ("id", "kind", "target", "payload_json", "headers", "entity_name", "entity_key",
                 "first_check_at", "next_check_at", "check_count", "attempt", "status",
                 "max_checks", "horizon", "timeout", "max_attempts", "misfire_grace",
                 "idempotency_key", "cwd", "created_at", "updated_at", "last_error",
                 "lease_owner", "lease_until", "started_at", "env", "schedule", "occurrence")
    id: str
    kind: Kind
    target: str
    payload_json: str  # the JSON text as stored, embedded as-is in callback bodies
    headers: dict[str, str]
    entity_name: str | None
    entity_key: str | None
    first_check_at: datetime
    next_check_at: datetime
    check_count: int
    attempt: int
    status: Status
    max_checks: int | None
    horizon: float | None
    timeout: float | None
    max_attempts: int | None
    misfire_grace: float | None
    idempotency_key: str | None
    cwd: str | None
    created_at: datetime | None
    updated_at: datetime | None
    last_error: str | None
    lease_owner: str | None
    lease_until: datetime | None
    # Set by ``Store.start``: the runner has begun executing this claim; from then on a cancel
    # or reschedule reports the job as being delivered instead of taking it back.
    started_at: datetime | None
    # exec jobs: the environment recorded at add (PATH and exported variables, minus secrets),
    # restored at run time as ``at`` does. None: not recorded (http/python, or turned off).
    env: dict[str, str] | None
    # An occurrence of a recurring schedule: the schedule's name and the occurrence's nominal
    # time (store-unique together: one job per occurrence). None for a one-off job.
    schedule: str | None
    occurrence: datetime | None

    def __new__(cls, id: str, kind: Kind, target: str, payload_json: str,
                headers: dict[str, str], entity_name: str | None, entity_key: str | None,
                first_check_at: datetime, next_check_at: datetime, check_count: int = 0,
                attempt: int = 0, status: Status = Status.PENDING,
                max_checks: int | None = None, horizon: float | None = None,
                timeout: float | None = None, max_attempts: int | None = None,
                misfire_grace: float | None = None, idempotency_key: str | None = None,
                cwd: str | None = None, created_at: datetime | None = None,
                updated_at: datetime | None = None, last_error: str | None = None,
                lease_owner: str | None = None, lease_until: datetime | None = None,
                started_at: datetime | None = None,
                env: dict[str, str] | None = None, schedule: str | None = None,
                occurrence: datetime | None = None) -> Job:
        s = _draft(cls)
        s.id = id
        s.kind = kind
        s.target = target
        s.payload_json = payload_json
        s.headers = headers
        s.entity_name = entity_name
        s.entity_key = entity_key
        s.first_check_at = first_check_at
        s.next_check_at = next_check_at
        s.check_count = check_count
        s.attempt = attempt
        s.status = status
        s.max_checks = max_checks
        s.horizon = horizon
        s.timeout = timeout
        s.max_attempts = max_attempts
        s.misfire_grace = misfire_grace
        s.idempotency_key = idempotency_key
        s.cwd = cwd
        s.created_at = created_at
        s.updated_at = updated_at
        s.last_error = last_error
        s.lease_owner = lease_owner
        s.lease_until = lease_until
        s.started_at = started_at
        s.env = env
        s.schedule = schedule
        s.occurrence = occurrence
        return _seal(s, cls)

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)


class Attempt(Record):
    """The context of one execution of a job, handed to an executor."""

    __slots__ = ("slot", "check", "attempt", "timeout")
    slot: str  # slot id YYYYMMDDHHMM
    check: int  # 1-based: this is the check_count+1-th check
    attempt: int  # 1-based attempt number within this check
    timeout: float  # seconds, a wall-clock deadline for the whole attempt

    def __new__(cls, slot: str, check: int, attempt: int, timeout: float) -> Attempt:
        s = _draft(cls)
        s.slot = slot
        s.check = check
        s.attempt = attempt
        s.timeout = timeout
        return _seal(s, cls)


class Call(Record):
    """What a ``--call`` function receives: the fields of the JSON body an http job POSTs, by
    the same names (a webhook handler and a ``--call`` function read one shape), as Python
    values: ``payload`` parsed, ``first_check_at`` and ``occurrence`` aware datetimes (UTC).
    ``job`` is the whole ``Job``; its field names (``entity_name``, ``entity_key``,
    ``payload_json``, ``target``, ``check_count``…) still read through as aliases, except
    ``attempt``, which is this attempt's number as in the body. Read-only. ::

        def order_shipped(job: Call) -> timedelta | None:   # myapp/checks.py
            return None if job.payload.get("shipped") else timedelta(hours=2)
    """

    __slots__ = ("id", "entity", "key", "payload", "check", "attempt", "slot", "first_check_at",
                 "schedule", "occurrence", "job")
    id: str
    entity: str | None
    key: str | None
    payload: Any
    check: int  # 1-based: which check of the job this is
    attempt: int  # 1-based attempt number within this check
    slot: str  # the slot being run, YYYYMMDDHHMM
    first_check_at: datetime
    schedule: str | None  # a recurring schedule's occurrence: its name and nominal time
    occurrence: datetime | None
    job: Job

    def __new__(cls, id: str, entity: str | None, key: str | None, payload: Any, check: int,
                attempt: int, slot: str, first_check_at: datetime, schedule: str | None,
                occurrence: datetime | None, job: Job) -> Call:
        s = _draft(cls)
        s.id = id
        s.entity = entity
        s.key = key
        s.payload = payload
        s.check = check
        s.attempt = attempt
        s.slot = slot
        s.first_check_at = first_check_at
        s.schedule = schedule
        s.occurrence = occurrence
        s.job = job
        return _seal(s, cls)

    @classmethod
    def of(cls, job: Job, attempt: Attempt) -> Call:
        return cls(job.id, job.entity_name, job.entity_key, job.payload, attempt.check,
                   attempt.attempt, attempt.slot, job.first_check_at, job.schedule,
                   job.occurrence, job)

    @property
    def entity_name(self) -> str | None:
        return self.entity

    @property
    def entity_key(self) -> str | None:
        return self.key

    if not TYPE_CHECKING:  # at run time only: a typed program should use the body's names
        def __getattr__(self, name: str) -> Any:
            if name in Job._fields:
                return getattr(self.job, name)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class Result(Record):
    """One execution's answer. Executors return this and never raise for a job's failure."""

    __slots__ = ("answer", "recheck_at", "retry_after", "status", "error", "output", "duration",
                 "deferred")
    answer: Answer
    recheck_at: datetime | None
    retry_after: float | None  # seconds, from Retry-After or the job's own answer
    status: int | None  # HTTP status or exit code
    error: str | None
    output: str | None
    duration: float  # seconds spent in this execution
    deferred: bool  # not attempted (host circuit open): move on, count no attempt

    def __new__(cls, answer: Answer, recheck_at: datetime | None = None,
                retry_after: float | None = None, status: int | None = None,
                error: str | None = None, output: str | None = None, duration: float = 0.0,
                deferred: bool = False) -> Result:
        s = _draft(cls)
        s.answer = answer
        s.recheck_at = recheck_at
        s.retry_after = retry_after
        s.status = status
        s.error = error
        s.output = output
        s.duration = duration
        s.deferred = deferred
        return _seal(s, cls)


class HistoryRow(Record):
    __slots__ = ("id", "kind", "target", "entity_name", "entity_key", "outcome", "reason",
                 "checks", "attempts", "first_check_at", "ended_at", "created_at",
                 "duration_ms", "last_status", "error", "output", "payload_json", "host", "pid",
                 "schedule")
    id: str
    kind: Kind
    target: str
    entity_name: str | None
    entity_key: str | None
    outcome: Outcome
    reason: str
    checks: int
    attempts: int
    first_check_at: datetime
    ended_at: datetime
    created_at: datetime | None
    duration_ms: float | None
    last_status: int | None
    error: str | None
    output: str | None
    payload_json: str | None
    host: str | None  # the runner that ended the job (None: cancelled, expired unrun…)
    pid: int | None
    schedule: str | None  # the recurring schedule whose occurrence this was

    def __new__(cls, id: str, kind: Kind, target: str, entity_name: str | None,
                entity_key: str | None, outcome: Outcome, reason: str, checks: int,
                attempts: int, first_check_at: datetime, ended_at: datetime,
                created_at: datetime | None, duration_ms: float | None, last_status: int | None,
                error: str | None, output: str | None,
                payload_json: str | None = None, host: str | None = None,
                pid: int | None = None, schedule: str | None = None) -> HistoryRow:
        s = _draft(cls)
        s.id = id
        s.kind = kind
        s.target = target
        s.entity_name = entity_name
        s.entity_key = entity_key
        s.outcome = outcome
        s.reason = reason
        s.checks = checks
        s.attempts = attempts
        s.first_check_at = first_check_at
        s.ended_at = ended_at
        s.created_at = created_at
        s.duration_ms = duration_ms
        s.last_status = last_status
        s.error = error
        s.output = output
        s.payload_json = payload_json
        s.host = host
        s.pid = pid
        s.schedule = schedule
        return _seal(s, cls)


def millis(seconds: float) -> float:
    """``seconds`` in milliseconds to the microsecond: for a float, exactly
    ``round(seconds * 1000, 3)`` (an execution's duration and lateness), without that round's
    decimal conversion (~0.35 µs, twice a callback) when the answer is plain. Below 2^52 a tie
    (n + 0.5 microseconds) is a double itself, and the product rounds to the nearest double:
    it lands on the same side of a tie as the exact value, or on the tie, which is left to
    round, as are zero (its sign), huge values, NaN and inf. The integer over 1000 is then
    correctly rounded, as round's decimal is."""
    ms = seconds * 1000
    us = ms * 1000.0
    if -1099511627776.0 < us < 1099511627776.0:  # 2^40
        n = round(us)
        if n and abs(us - n) < 0.5:
            return n / 1000
    return round(ms, 3)


class Execution(Record):
    """One execution of a job (a row of the per-execution event log), for ``show`` and
    ``stats``."""

    __slots__ = ("job_id", "at", "slot", "check", "attempt", "answer", "status", "duration_ms",
                 "lateness_ms", "error", "host", "pid")
    job_id: str
    at: datetime  # when the attempt started
    slot: str  # slot id YYYYMMDDHHMM
    check: int
    attempt: int
    answer: Answer
    status: int | None  # HTTP status or exit code
    duration_ms: float | None
    lateness_ms: float | None  # start minus the slot boundary
    error: str | None
    host: str | None  # the runner's host name and process id
    pid: int | None

    def __new__(cls, job_id: str, at: datetime, slot: str, check: int, attempt: int,
                answer: Answer, status: int | None = None, duration_ms: float | None = None,
                lateness_ms: float | None = None, error: str | None = None,
                host: str | None = None, pid: int | None = None) -> Execution:
        s = _draft(cls)
        s.job_id = job_id
        s.at = at
        s.slot = slot
        s.check = check
        s.attempt = attempt
        s.answer = answer
        s.status = status
        s.duration_ms = duration_ms
        s.lateness_ms = lateness_ms
        s.error = error
        s.host = host
        s.pid = pid
        return _seal(s, cls)


# -- decisions: what the runner asks the store to apply after an execution ------------------
@final  # nothing subclasses a decision: ``type(d) is End`` tells the two apart
class End(Record):
    """End a job: delete it from future_job and write its history row."""

    __slots__ = ("job", "outcome", "reason", "result", "lateness")
    job: Job
    outcome: Outcome
    reason: str
    result: Result | None  # the last execution, if any
    lateness: float | None  # seconds between the slot boundary and the execution

    def __new__(cls, job: Job, outcome: Outcome, reason: str, result: Result | None,
                lateness: float | None = None) -> End:
        s = _draft(cls)
        s.job = job
        s.outcome = outcome
        s.reason = reason
        s.result = result
        s.lateness = lateness
        return _seal(s, cls)


class Reslot(Record):
    """Put a job back to pending in a later slot (a re-check, a retry, or a deferral)."""

    __slots__ = ("job", "next_check_at", "check_count", "attempt", "result", "error")
    job: Job
    next_check_at: datetime
    check_count: int
    attempt: int
    result: Result | None
    error: str | None

    def __new__(cls, job: Job, next_check_at: datetime, check_count: int, attempt: int,
                result: Result | None, error: str | None = None) -> Reslot:
        s = _draft(cls)
        s.job = job
        s.next_check_at = next_check_at
        s.check_count = check_count
        s.attempt = attempt
        s.result = result
        s.error = error
        return _seal(s, cls)


Decision = End | Reslot


class Schedule(Record):
    """A recurring schedule as the store keeps it: its rule, its missed-run policy, the job each
    occurrence is made from, and the nominal time of its one pending occurrence (``next_at``).
    The rules of re-arming are ``store.schedrules``'; the rule's times, ``recurrence``'s."""

    __slots__ = ("name", "cron", "every", "start", "zone", "missed", "window", "resolution",
                 "template", "next_at", "paused_at", "created_at")
    name: str
    cron: str | None  # five fields as stored (``recurrence.parse_cron``); or
    every: int | None  # seconds between occurrences, from ``start``
    start: datetime | None
    zone: str  # IANA name
    missed: str  # skip | once | all (``missed.Missed``)
    window: float  # seconds: ``all`` fires missed occurrences this recent
    resolution: int  # the slots' minutes its occurrences are rounded up to
    template: Job  # what each occurrence's job is made of (id, times, schedule filled in)
    next_at: datetime  # the nominal time of the occurrence pending (or paused) now
    paused_at: datetime | None
    created_at: datetime

    def __new__(cls, name: str, cron: str | None, every: int | None, start: datetime | None,
                zone: str, missed: str, window: float, resolution: int, template: Job,
                next_at: datetime, paused_at: datetime | None = None,
                created_at: datetime | None = None) -> Schedule:
        s = _draft(cls)
        s.name = name
        s.cron = cron
        s.every = every
        s.start = start
        s.zone = zone
        s.missed = missed
        s.window = window
        s.resolution = resolution
        s.template = template
        s.next_at = next_at
        s.paused_at = paused_at
        s.created_at = created_at if created_at is not None else next_at
        return _seal(s, cls)


# -- what store operations answer ------------------------------------------------------------
class Added(Record):
    __slots__ = ("job", "created")
    job: Job
    created: bool  # False: an existing job returned for the same idempotency key

    def __new__(cls, job: Job, created: bool) -> Added:
        s = _draft(cls)
        s.job = job
        s.created = created
        return _seal(s, cls)


class CancelResult(Record):
    """What a cancel did, as job ids: ``cancelled`` were ended (outcome ``cancelled``),
    ``running`` were being delivered by a live runner and left alone (their real outcome goes
    to history), ``missing`` were not pending (unknown, or already ended). Three lists of one
    kind, so ``as_dict()`` is JSON as it stands; ``jobs`` holds the cancelled and running
    ``Job``s by id for a caller that wants more than the id (which runner, which slot)."""

    __slots__ = ("cancelled", "running", "missing", "jobs")
    cancelled: list[str]
    running: list[str]
    missing: list[str]
    jobs: dict[str, Job]

    def __new__(cls, cancelled: list[str], running: list[str], missing: list[str],
                jobs: dict[str, Job]) -> CancelResult:
        s = _draft(cls)
        s.cancelled = cancelled
        s.running = running
        s.missing = missing
        s.jobs = jobs
        return _seal(s, cls)

    @classmethod
    def of(cls, cancelled: list[Job], running: list[Job],
           missing: list[str] | None = None) -> CancelResult:
        """From the jobs a store ended and the ones it left running."""
        return cls([j.id for j in cancelled], [j.id for j in running], missing or [],
                   {j.id: j for j in (*cancelled, *running)})

    def as_dict(self) -> dict[str, list[str]]:
        """``{"cancelled": [...], "running": [...], "missing": [...]}``: job ids."""
        return {"cancelled": list(self.cancelled), "running": list(self.running),
                "missing": list(self.missing)}


class LeaseGroup(Record):
    """Jobs in flight, grouped by lease owner (``doctor``)."""

    __slots__ = ("owner", "jobs", "expired", "alive", "ends")
    owner: str | None
    jobs: int
    expired: int  # of those, how many have ``lease_until <= now``
    alive: bool | None  # the owner's session is open; None: the store cannot tell
    ends: datetime | None  # the last of those leases ends then (the store's lease clock)

    def __new__(cls, owner: str | None, jobs: int, expired: int,
                alive: bool | None, ends: datetime | None = None) -> LeaseGroup:
        s = _draft(cls)
        s.owner = owner
        s.jobs = jobs
        s.expired = expired
        s.alive = alive
        s.ends = ends
        return _seal(s, cls)


# A histogram the store computed: (cumulative counts at or under each bound, count, sum)
Durations = tuple[list[int], int, float]


class StoreStats(Record):
    """Aggregates for ``awty stats``, computed by the store (never by holding rows)."""

    __slots__ = ("pending", "in_flight", "stale_leases", "by_kind", "next_slots", "past_slots",
                 "past_jobs", "outcomes", "executions", "by_answer", "retries", "failures",
                 "lateness_count", "lateness_median_ms", "lateness_p99_ms", "lateness_max_ms")
    pending: int
    in_flight: int
    stale_leases: int  # in flight, lease expired, owner not alive
    by_kind: dict[str, int]
    next_slots: list[tuple[datetime, int]]  # the first slots at or after ``current``
    past_slots: int  # slots before ``current`` still holding jobs
    past_jobs: int
    outcomes: dict[str, int]  # history rows ended since ``since``, by outcome
    executions: int  # executions since ``since``
    by_answer: dict[str, int]
    retries: int  # executions that were a second or later attempt
    failures: int  # executions that answered retry or fail
    lateness_count: int
    lateness_median_ms: float | None
    lateness_p99_ms: float | None
    lateness_max_ms: float | None

    def __new__(cls, pending: int, in_flight: int, stale_leases: int, by_kind: dict[str, int],
                next_slots: list[tuple[datetime, int]], past_slots: int, past_jobs: int,
                outcomes: dict[str, int], executions: int, by_answer: dict[str, int],
                retries: int, failures: int, lateness_count: int,
                lateness_median_ms: float | None, lateness_p99_ms: float | None,
                lateness_max_ms: float | None) -> StoreStats:
        s = _draft(cls)
        s.pending = pending
        s.in_flight = in_flight
        s.stale_leases = stale_leases
        s.by_kind = by_kind
        s.next_slots = next_slots
        s.past_slots = past_slots
        s.past_jobs = past_jobs
        s.outcomes = outcomes
        s.executions = executions
        s.by_answer = by_answer
        s.retries = retries
        s.failures = failures
        s.lateness_count = lateness_count
        s.lateness_median_ms = lateness_median_ms
        s.lateness_p99_ms = lateness_p99_ms
        s.lateness_max_ms = lateness_max_ms
        return _seal(s, cls)


class StoreHealth(Record):
    """``Store.check()``: what doctor reports about the store itself."""

    __slots__ = ("ok", "schema_version", "detail", "problems", "expected_version")
    ok: bool
    schema_version: int
    detail: str  # e.g. "PRAGMA integrity_check: ok", "PostgreSQL 15.2 at /run/…, schema awty"
    problems: tuple[str, ...]
    expected_version: int  # the schema version this awty's store writes (doctor compares)

    def __new__(cls, ok: bool, schema_version: int, detail: str, problems: tuple[str, ...] = (),
                expected_version: int = 0) -> StoreHealth:
        s = _draft(cls)
        s.ok = ok
        s.schema_version = schema_version
        s.detail = detail
        s.problems = problems
        s.expected_version = expected_version
        return _seal(s, cls)


class SlotSummary:
    """What one slot's run did (mutable: the runner counts into it)."""

    def __init__(self, slot: str, ran: int = 0, outcomes: dict[str, int] | None = None,
                 rechecked: int = 0, retried: int = 0, deferred: int = 0, imported: int = 0,
                 orphans_removed: int = 0, rejected: int = 0, skipped_cancelled: int = 0,
                 seconds: float = 0.0, busy: str | None = None, dry_run: bool = False,
                 late: list[SlotSummary] | None = None) -> None:
        self.slot = slot
        self.ran = ran
        self.outcomes: dict[str, int] = {} if outcomes is None else outcomes  # done/gone/…
        self.rechecked = rechecked
        self.retried = retried  # re-slotted for a later attempt
        self.deferred = deferred  # pushed to the next slot by a host's circuit breaker
        self.imported = imported
        self.orphans_removed = orphans_removed
        self.rejected = rejected
        self.skipped_cancelled = skipped_cancelled
        self.seconds = seconds
        self.busy = busy  # set when another runner held the slot's lock
        self.dry_run = dry_run
        # cron's run of the current slot: the late slots it ran after it ([] none, None: not
        # such a run)
        self.late = late

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_dict()!r})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def count(self, key: str, n: int = 1) -> None:
        self.outcomes[key] = self.outcomes.get(key, 0) + n

    def to_dict(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "ran": self.ran,
            "outcomes": dict(self.outcomes),
            "rechecked": self.rechecked,
            "retried": self.retried,
            "deferred": self.deferred,
            "imported": self.imported,
            "orphans_removed": self.orphans_removed,
            "rejected": self.rejected,
            "seconds": round(self.seconds, 3),
            "busy": self.busy,
            "dry_run": self.dry_run,
            **({} if self.late is None else {"late": [s.to_dict() for s in self.late]}),
        }


class RunSummary(SlotSummary):
    """What ``Awty.run_now`` did (``awty run ID…``): a slot run's counts, and what became of
    each job: ``{"id", "outcome", "reason", "status", "next_check_at"}``, where outcome is an
    ``Outcome`` value for a job that ended, else ``rechecked``, ``retried`` or ``deferred``
    (``next_check_at``: the slot it waits in now)."""

    def __init__(self, slot: str, jobs: list[dict[str, Any]] | None = None,
                 **counts: Any) -> None:
        super().__init__(slot, **counts)
        self.jobs: list[dict[str, Any]] = [] if jobs is None else jobs

    def to_dict(self) -> dict[str, Any]:
        return {**SlotSummary.to_dict(self), "jobs": [dict(j) for j in self.jobs]}


def run_order(job: Job) -> tuple[datetime, str]:
    """The order runs take jobs in: by slot, then by id (ids of one due time in text order)."""
    return job.next_check_at, job.id


class ApiToken(Record):
    """A token of ``awty serve`` (``awty token new``), as the store keeps it: never the token
    itself, only its SHA-256 (``Store.token_for``). ``scopes`` from ``tokens.SCOPES``;
    ``allow_callbacks``: URL prefixes the token's http jobs must start with (empty: any the
    SSRF rules allow); ``exec_dir`` and ``exec_env``: where an exec or python job added with it
    runs and the whole environment it gets (looked up when the job runs: a job keeps only a
    reference, ``execenv.token_ref``); ``rate``: at most this many requests a period
    (``tokens.parse_rate``'s text, e.g. ``100/s``; None: no limit); ``ref``: random, made with
    the token, so that a job added with a revoked token never runs with the environment of a
    new token given the same name (None: a token made before refs)."""

    __slots__ = ("name", "scopes", "created_at", "last_used_at", "allow_callbacks", "exec_dir",
                 "exec_env", "rate", "ref")
    name: str
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    allow_callbacks: tuple[str, ...]
    exec_dir: str | None
    exec_env: dict[str, str]
    rate: str | None
    ref: str | None

    def __new__(cls, name: str, scopes: tuple[str, ...], created_at: datetime,
                last_used_at: datetime | None = None, allow_callbacks: tuple[str, ...] = (),
                exec_dir: str | None = None, exec_env: dict[str, str] | None = None,
                rate: str | None = None, ref: str | None = None) -> ApiToken:
        s = _draft(cls)
        s.name = name
        s.scopes = scopes
        s.created_at = created_at
        s.last_used_at = last_used_at
        s.allow_callbacks = allow_callbacks
        s.exec_dir = exec_dir
        s.exec_env = dict(exec_env or {})
        s.rate = rate
        s.ref = ref
        return _seal(s, cls)

    def options(self) -> dict[str, Any]:
        """What the store keeps beside the name and scopes, as JSON (a column both stores have
        had since tokens: a new key needs no migration, and an older awty ignores it)."""
        return {"allow_callbacks": list(self.allow_callbacks), "exec_dir": self.exec_dir,
                "exec_env": self.exec_env, "rate": self.rate, "ref": self.ref}

    @classmethod
    def stored(cls, name: str, scopes: list[str], created_at: datetime,
               last_used_at: datetime | None, options: dict[str, Any]) -> ApiToken:
        return cls(name, tuple(scopes), created_at, last_used_at,
                   tuple(options.get("allow_callbacks") or ()), options.get("exec_dir"),
                   options.get("exec_env") or {}, options.get("rate"), options.get("ref"))
