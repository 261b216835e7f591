"""Records and closed sets. Frozen dataclasses; the store and the executors speak in these."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    HTTP = "http"
    EXEC = "exec"
    PYTHON = "python"


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


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    kind: Kind
    target: str
    payload_json: str  # the JSON text as stored, embedded as-is in callback bodies
    headers: dict[str, str]
    entity_name: str | None
    entity_key: str | None
    first_check_at: datetime
    next_check_at: datetime
    check_count: int = 0
    attempt: int = 0
    status: Status = Status.PENDING
    max_checks: int | None = None
    horizon: float | None = None
    timeout: float | None = None
    max_attempts: int | None = None
    misfire_grace: float | None = None
    idempotency_key: str | None = None
    cwd: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_error: str | None = None
    lease_owner: str | None = None
    lease_until: datetime | None = None
    # Set by ``Store.start``: the runner has begun executing this claim; from then on a cancel
    # or reschedule reports the job as being delivered instead of taking it back.
    started_at: datetime | None = None
    # exec jobs: the environment recorded at add (PATH and exported variables, minus secrets),
    # restored at run time as ``at`` does. None: not recorded (http/python, or turned off).
    env: dict[str, str] | None = None

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)


@dataclass(frozen=True, slots=True)
class Attempt:
    """The context of one execution of a job, handed to an executor."""

    slot: str  # slot id YYYYMMDDHHMM
    check: int  # 1-based: this is the check_count+1-th check
    attempt: int  # 1-based attempt number within this check
    timeout: float  # seconds, a wall-clock deadline for the whole attempt


@dataclass(frozen=True, slots=True)
class Result:
    """One execution's answer. Executors return this and never raise for a job's failure."""

    answer: Answer
    recheck_at: datetime | None = None
    retry_after: float | None = None  # seconds, from Retry-After or the job's own answer
    status: int | None = None  # HTTP status or exit code
    error: str | None = None
    output: str | None = None
    duration: float = 0.0  # seconds spent in this execution
    deferred: bool = False  # not attempted (host circuit open): move on, count no attempt


@dataclass(frozen=True, slots=True)
class HistoryRow:
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
    payload_json: str | None = None


@dataclass(frozen=True, slots=True)
class Execution:
    """One execution of a job (a row of the per-execution event log), for ``show`` and
    ``stats``."""

    job_id: str
    at: datetime  # when the attempt started
    slot: str  # slot id YYYYMMDDHHMM
    check: int
    attempt: int
    answer: Answer
    status: int | None = None  # HTTP status or exit code
    duration_ms: float | None = None
    lateness_ms: float | None = None  # start minus the slot boundary
    error: str | None = None


# -- decisions: what the runner asks the store to apply after an execution ------------------
@dataclass(frozen=True, slots=True)
class End:
    """End a job: delete it from future_job and write its history row."""

    job: Job
    outcome: Outcome
    reason: str
    result: Result | None  # the last execution, if any
    lateness: float | None = None  # seconds between the slot boundary and the execution


@dataclass(frozen=True, slots=True)
class Reslot:
    """Put a job back to pending in a later slot (a re-check, a retry, or a deferral)."""

    job: Job
    next_check_at: datetime
    check_count: int
    attempt: int
    result: Result | None
    error: str | None = None


Decision = End | Reslot


# -- what store operations answer ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Added:
    job: Job
    created: bool  # False: an existing job returned for the same idempotency key


@dataclass(frozen=True, slots=True)
class CancelResult:
    """What a cancel did. Only ``cancelled`` jobs were ended (outcome ``cancelled``)."""

    cancelled: list[Job]
    running: list[Job]  # started by a live runner: left alone, their real outcome goes to history
    missing: list[str]  # ids not pending (unknown, or already ended)


@dataclass(frozen=True, slots=True)
class LeaseGroup:
    """Jobs in flight, grouped by lease owner (``doctor``)."""

    owner: str | None
    jobs: int
    expired: int  # of those, how many have ``lease_until <= now``
    alive: bool | None  # the owner's session is open; None: the store cannot tell


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Aggregates for ``awty stats``, computed by the store (never by holding rows)."""

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


@dataclass(frozen=True, slots=True)
class StoreHealth:
    """``Store.check()``: what doctor reports about the store itself."""

    ok: bool
    schema_version: int
    detail: str  # e.g. "PRAGMA integrity_check: ok", "PostgreSQL 15.2 at /run/…, schema awty"
    problems: tuple[str, ...] = ()
    expected_version: int = 0  # the schema version this awty's store writes (doctor compares)


@dataclass
class SlotSummary:
    slot: str
    ran: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # done/gone/failed/expired counts
    rechecked: int = 0
    retried: int = 0  # re-slotted for a later attempt
    deferred: int = 0  # pushed to the next slot by a host's circuit breaker
    imported: int = 0
    orphans_removed: int = 0
    rejected: int = 0
    skipped_cancelled: int = 0
    seconds: float = 0.0
    busy: str | None = None  # set when another runner held the slot's lock
    dry_run: bool = False

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
        }


@dataclass
class RunSummary(SlotSummary):
    """What ``Awty.run_now`` did (``awty run ID…``): a slot run's counts, and what became of
    each job: ``{"id", "outcome", "reason", "status", "next_check_at"}``, where outcome is an
    ``Outcome`` value for a job that ended, else ``rechecked``, ``retried`` or ``deferred``
    (``next_check_at``: the slot it waits in now)."""

    jobs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**SlotSummary.to_dict(self), "jobs": [dict(j) for j in self.jobs]}


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # 10 bits -> 2 characters
_SHIFTS = range(120, -10, -10)


def new_id(now: datetime) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, in Crockford base32 (26
    characters). Text order is creation order, which gives a slot its deterministic firing
    order."""
    n = (int(now.timestamp() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join([_PAIRS[(n >> s) & 1023] for s in _SHIFTS])
