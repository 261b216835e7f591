"""The store rules, written once: what every store decides the same way, as pure functions of
records (no SQL, no lock, no I/O). Each store reads what a rule needs, calls it, and writes
what it decided (``sqlite*.py``, ``postgres.py``, ``pg_*.py``: SQL and locks only):

- ``admit``: a batch's idempotency keys against the stored ones (``Store.add``;
  ``admit_chunk``, ``Store.add_chunks``);
- ``running``: whether a claimed job is being delivered (``cancel``, ``reschedule``);
- ``ended``: what a history row records of a job that ends (``finish``, ``cancel``);
- ``rearm``: the job an ended one becomes again (``retry``);
- ``kept``: what a store keeps of a text a run wrote (cut at ``ERROR_CHARS``, escaped so that
  both stores can keep it: ``awty/storable.py``);
- ``histograms``: the two duration histograms a store's one row of counts holds
  (``Store.durations``);
- ``ERROR_CHARS``, ``REARMABLE``, and the text of every ``Conflict`` a store raises, so that
  both stores say the same thing.

(The contract, ``base.py``, says what these rules are for; ``tests/store/test_contract*.py``
check each store keeps them.)"""

from __future__ import annotations

from datetime import datetime

from ..errors import Conflict, Revoked
from ..ids import runner_host_pid, runner_label
from ..model import (
    Added, Execution, Job, Outcome, Result, Schedule, Status, millis, run_order,
)
from ..slots import iso
from ..storable import storable

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
    from typing import Any

    from ..model import Durations

ERROR_CHARS = 2000  # of a result's error and output kept in history (and a job's last error)
# Outcomes whose history row keeps the whole job, to be re-armed by `retry` (so does a row of a
# job with an idempotency key: what idempotency answers after the job ended).
REARMABLE = frozenset((Outcome.FAILED, Outcome.EXPIRED, Outcome.CANCELLED))
# by text: an Enum's hash is Python-level, and ``ended`` asks once a job a run ends
_REARMABLE_TEXTS = frozenset(o._value_ for o in REARMABLE)


def kept(text: str | None) -> str | None:
    """What a store keeps of an error, an output or a reason a run wrote: at most
    ``ERROR_CHARS`` characters, NUL and lone surrogates escaped (``storable``), None for
    none. Every such text goes through here, on both stores."""
    return storable(text[:ERROR_CHARS]) if text else None


# --- what a store says when it refuses ---------------------------------------------------------
def key_taken(key: str, job_id: str) -> Conflict:
    return Conflict(f"idempotency key {key!r} already names job {job_id}, which is a "
                    "different job")


def key_twice(key: str) -> Conflict:
    return Conflict(f"idempotency key {key!r} is used twice in this batch for different jobs")


def id_taken() -> Conflict:
    """A job id already stored (ids are ULIDs: a batch given one twice, or an import into a
    store that has them)."""
    return Conflict("cannot add: a job with one of these ids already exists")


def schedule_taken(schedules: Sequence[Schedule],
                   stored: Callable[[str], bool]) -> Conflict | None:
    """An import that hit the schedule names' key: the first of ``schedules`` whose name the
    store holds (``stored``) or the import gives twice, named; None if none is (the key hit
    was another)."""
    seen: set[str] = set()
    for s in schedules:
        if s.name in seen or stored(s.name):
            return Conflict(f"cannot import: schedule {s.name!r} already exists")
        seen.add(s.name)
    return None


def occurrence_taken(jobs: Sequence[Job],
                     held: Callable[[str, datetime], str | None]) -> Conflict:
    """An add that hit the (schedule, occurrence) key (a dropped-in envelope naming an
    occurrence whose job the store holds, or a batch naming one twice): the first job of
    ``jobs`` whose occurrence is taken, by the batch or by the store (``held``: the id of the
    job holding it)."""
    seen: dict[tuple[str, datetime], str] = {}
    for j in jobs:
        if j.schedule is None or j.occurrence is None:
            continue
        key = (j.schedule, j.occurrence)
        other = seen.get(key) or held(*key)
        if other is not None:
            return Conflict(f"cannot add: job {j.id} is the {iso(j.occurrence)} occurrence of "
                            f"schedule {j.schedule}, which job {other} holds already")
        seen[key] = j.id
    return id_taken()


def tokens_gone(asked: Collection[str], found: Iterable[str]) -> None:
    """``Store.add``'s token check: ``Revoked`` for those of ``asked`` not ``found``."""
    gone = frozenset(asked).difference(found)
    if gone:
        raise Revoked(gone)


def token_taken(name: str) -> Conflict:
    return Conflict(f"a token named {name!r} exists: revoke it first (`awty token revoke "
                    f"{name}`) or choose another name")


def being_delivered(job: Job) -> Conflict:
    return Conflict(f"job {job.id} is being delivered now ({runner_label(job.lease_owner)}, "
                    f"owner {job.lease_owner}); its outcome will be in history")


def still_pending(job_id: str) -> Conflict:
    return Conflict(f"job {job_id} is still pending; nothing to retry")


def not_rearmable(job_id: str, outcome: str) -> Conflict:
    return Conflict(f"job {job_id} ended {outcome}; only failed, expired or cancelled jobs "
                    "can be re-armed")


# --- adding ------------------------------------------------------------------------------------
def admit(jobs: Sequence[Job], fingerprints: Sequence[str | None],
          known: Mapping[str, tuple[Job, str | None]]
          ) -> tuple[list[Added], list[tuple[Job, str | None]]]:
    """A batch against the idempotency keys already stored (``known``: key -> the job that
    holds it, pending or in history, and its fingerprint): what ``add`` gives back for each
    job, and the rows to insert, in run order (a slot's rows then sit together). A key given
    again with the same fingerprint gives the job that holds it (``created=False``), also
    within the batch; with another, ``Conflict`` and nothing is inserted."""
    out: list[Added] = []
    rows: list[tuple[Job, str | None]] = []
    firsts: dict[str, tuple[Job, str | None]] = {}
    for j, fp in zip(jobs, fingerprints, strict=True):
        key = j.idempotency_key
        if key:
            if key in known:
                held, held_fp = known[key]
                if held_fp != fp:
                    raise key_taken(key, held.id)
                out.append(Added(held, False))
                continue
            if key in firsts:
                if firsts[key][1] != fp:
                    raise key_twice(key)
                out.append(Added(firsts[key][0], False))
                continue
            firsts[key] = (j, fp)
        rows.append((j, fp))
        out.append(Added(j, True))
    rows.sort(key=lambda pair: run_order(pair[0]))
    return out, rows


def admit_chunk(jobs: Sequence[Job], fingerprints: Sequence[str | None]
                ) -> tuple[list[Added], list[tuple[Job, str | None]]]:
    """``admit`` of a chunk of ``Store.add_chunks``: a job with an idempotency key (whose
    look-up needs the whole batch) or a schedule (whose occurrence key ``add`` names) is a
    caller's mistake there, refused before anything of it is written."""
    if any(j.idempotency_key or j.schedule for j in jobs):
        raise ValueError("add_chunks: a job with an idempotency key or a schedule goes "
                         "through add")
    return admit(jobs, fingerprints, {})


# --- cancel and reschedule ---------------------------------------------------------------------
def running(job: Job, alive: bool | None, now: datetime) -> bool:
    """Started and, as far as anyone can tell, being executed: its owner is alive, or (when
    the store cannot tell, ``alive`` None) its lease is live at ``now`` (the lease clock's).
    A started job of a dead owner is not running, whatever its lease says: it may be
    cancelled (``base.py``)."""
    if job.status is not Status.IN_FLIGHT or job.started_at is None:
        return False
    if alive is None:
        return job.lease_until is not None and job.lease_until > now
    return alive


# --- ending -------------------------------------------------------------------------------------
def ended(job: Job, outcome: Outcome, reason: str, result: Result | None,
          lateness: float | None, owner: str | None
          ) -> tuple[str, int, int, float | None, float | None, int | None, str | None,
                     str | None, bool, str | None, int | None]:
    """What a history row records of ``job`` ending as ``outcome`` for ``reason`` beside the
    job's own fields: (reason, checks, attempts, duration_ms, lateness_ms, last_status, error,
    output, keep_job, host, pid). An execution that ended it (``result``) counts as a check
    and an attempt; reason, error and output are ``kept``; ``keep_job``: the row keeps the
    whole job (re-armable, or idempotency after the end), else only its payload; host and
    pid: the runner that ended it (``owner``; None for a cancel)."""
    ran = 1 if result is not None else 0
    host, pid = runner_host_pid(owner)
    return (
        kept(reason) or "", job.check_count + ran, job.attempt + ran,
        # ``millis`` is round(x * 1000, 3) without its decimal conversion; float() keeps an
        # int's milliseconds a float, as the float8 columns take them
        millis(float(result.duration)) if result is not None else None,
        millis(float(lateness)) if lateness is not None else None,
        result.status if result is not None else None,
        kept(result.error) if result is not None else None,
        kept(result.output) if result is not None else None,
        outcome._value_ in _REARMABLE_TEXTS or bool(job.idempotency_key), host, pid,
    )


def folds(e: Execution, ended_at: datetime,
          row: tuple[float | None, float | None, int | None, str | None, str | None, int | None],
          ) -> bool:
    """Whether the execution ``e`` that ended a job may be kept on the job's history row
    (its exec_* columns) rather than as an execution row of its own: it says what the row
    says, (duration_ms, lateness_ms, last_status, error, host, pid) as ``ended`` gives them,
    and it began no later than the row's ``ended_at`` (reads of executions since an instant
    find the folded ones through the history's ended_at index; both stores keep whole seconds,
    and truncation keeps the order). Read back, it is the same execution."""
    ms, late, status, error, host, pid = row
    return (e.duration_ms == ms and e.lateness_ms == late and e.status == status
            and kept(e.error) == error and e.host == host and e.pid == pid
            and e.at <= ended_at)


def in_recorded_order(events: list[Execution],
                      ends: list[tuple[int, int, Execution | None]]) -> list[Execution]:
    """A job's executions in the order they were recorded, as its execution rows gave them
    before ``folds`` kept some on history rows: ``events``, its execution rows in the order
    written; ``ends``, its history rows in the order written, each (checks, attempts, the
    execution folded into it or None). Neither the time an execution says it began (a clock
    stepped back) nor a second's tie (a job re-armed by ``retry`` at once) says it: within
    one life of the job (up to a history row) each execution's (check, attempt) is above the
    one before, and a new life starts again at (1, 1). So each history row takes the rising
    run of execution rows that follows what the rows before took, up to its folded execution
    (which ended that life) or, without one, up to what its counts allow: a next check
    (``ended``'s checks count the ones done), the same attempt; then its folded execution.
    What is left (the life still pending) comes last."""
    out: list[Execution] = []
    i, n = 0, len(events)
    for checks, attempts, folded in ends:
        top, before = ((folded.check, folded.attempt), True) if folded is not None else (
            (checks + 1, attempts), False)
        last = (0, 0)
        while i < n:
            key = (events[i].check, events[i].attempt)
            if not (last < key and (key < top if before else key <= top)):
                break
            out.append(events[i])
            last, i = key, i + 1
        if folded is not None:
            out.append(folded)
    out.extend(events[i:])
    return out


def recorded_executions(rows: Iterable[tuple[Any, ...]],
                        decode: Callable[[tuple[Any, ...]], Execution]) -> list[Execution]:
    """``in_recorded_order`` over a job's rows as both stores read them: an execution's columns
    (``decode`` makes one of them; its ``at`` NULL on a history row that holds none), then 0
    for an execution row or 1 for a history row, its seq, and a history row's checks and
    attempts; execution rows first, each kind in the order written."""
    events: list[Execution] = []
    ends: list[tuple[int, int, Execution | None]] = []
    for r in rows:
        if r[12]:
            ends.append((r[14], r[15], decode(r) if r[1] is not None else None))
        else:
            events.append(decode(r))
    return in_recorded_order(events, ends)


def histograms(row: Sequence[Any], executions_ms: Sequence[float]) -> tuple[Durations, Durations]:
    """The executions' histogram and the runs' from the end of ``row`` (each a count at or under
    each bound, the count, the sum; the executions' bounds first)."""
    split = len(executions_ms) + 2
    executed, ran = row[:split], row[split:]
    return ((list(executed[:-2]), executed[-2], float(executed[-1])),
            (list(ran[:-2]), ran[-2], float(ran[-1])))


def last_error(error: str | None, result: Result | None) -> str | None:
    """A re-slotted job's last error: the decision's, else its result's, ``kept``."""
    return kept(error or (result.error if result is not None else None))


# --- re-arming -----------------------------------------------------------------------------------
def paused_reason(s: Schedule, job: Job) -> str:
    """The reason a pause of ``s`` cancels ``job`` with. A job of an occurrence ``s`` has
    moved past (a missed one ``--missed all`` made) says so: the schedule made it once, as it
    moved past, and no other job of it can ever be made, so ``rearm`` lets retry make it
    again; its pending occurrence's job, which resume makes anew, says only paused."""
    if job.occurrence is not None and job.occurrence < s.next_at:
        return _paused_past(s.name, job.occurrence)
    return f"schedule {s.name} paused"


def _paused_past(name: str, occurrence: datetime) -> str:
    return f"schedule {name} paused (its missed {iso(occurrence)} occurrence)"


def rearm(job_id: str, old: Job | None, outcome: str, *, next_check_at: datetime,
          now: datetime, key_free: bool, held_by: str | None = None,
          schedule_at: datetime | None = None, reason: str | None = None) -> Job:
    """The job an ended one (its last history row: ``old``, the whole job it kept, else None)
    becomes on ``retry``: pending in ``next_check_at`` with fresh checks and attempts. A row
    that kept no job cannot be re-armed (``Conflict``); its idempotency key goes with it only
    when no live job took the key since (``key_free``). A schedule's occurrence whose job the
    store holds again (``held_by``: a schedule paused, then resumed, makes the occurrence it
    cancelled anew) is not re-armed: one job per occurrence (``Conflict``). Nor is a cancelled
    occurrence its schedule has moved past (``schedule_at``: the schedule's ``next_at``): a
    schedule moves on from an occurrence only by claiming a job of it, so another job fired
    it (or the missed policy skipped it), and history keeps too little of a plain ended job
    to tell which; unless the pause cancelled it as an occurrence the schedule had moved past
    already (``reason``, ``paused_reason``): no other job of it was ever made."""
    if old is None:
        raise not_rearmable(job_id, outcome)
    if held_by is not None:
        raise Conflict(f"job {job_id} is the {iso(old.occurrence)} occurrence of schedule "
                       f"{old.schedule}, which job {held_by} holds now; nothing to retry")
    if (outcome == Outcome.CANCELLED and old.occurrence is not None
            and schedule_at is not None and old.occurrence < schedule_at
            and reason != _paused_past(str(old.schedule), old.occurrence)):
        raise Conflict(f"job {job_id} is the {iso(old.occurrence)} occurrence of schedule "
                       f"{old.schedule}, which has moved on to {iso(schedule_at)} since it was "
                       "cancelled; nothing to retry")
    return old.replace(next_check_at=next_check_at, check_count=0, attempt=0,
                       status=Status.PENDING,
                       idempotency_key=old.idempotency_key if key_free else None,
                       updated_at=now, lease_owner=None, lease_until=None, started_at=None,
                       last_error=None)
