"""The rules of recurring schedules in the store, written once for both stores (pure: records
in, records out; ``now`` is an argument). Each store reads the schedule rows a claim needs,
calls ``at_claim``, and writes what it decided in the claim's own transaction:

- only the next occurrence of a schedule exists as a pending job; it is made when the one
  before it is claimed (``at_claim``), or when the schedule is added or resumed
  (``occurrence_job``);
- a schedule's ``next_at`` names that occurrence and moves on only from it (a compare and set):
  a claim taken over after a crash, a re-run or a second runner finds ``next_at`` already moved
  and makes nothing, so no occurrence ever gets two jobs (the stores also keep
  ``(schedule, occurrence)`` unique among pending jobs);
- an occurrence to make whose job the store holds already (a home moved while its runner
  claimed, a retried occurrence, a job left by a removed schedule of the same name) is not
  made again: that job is the occurrence's (``settle``, ``first_free``), and the claim goes on;
- what the missed-run policy (``missed.catch_up``) does not fire ends as one ``skipped``
  history row saying how many and why.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from ..ids import new_id, new_ids
from ..model import Job, Schedule, Status
from ..record import Record, _draft, _seal
from ..slots import slot_for

TYPE_CHECKING = False  # `typing` costs each start ~3 ms (`schedule add`); mypy reads it as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ..recurrence import Rule

_ZERO = timedelta(0)
_NONE: Any = object()  # not looked up yet (None is an answer)


class Rearm(Record):
    """What a store does at the claim of a schedule's pending occurrence."""

    __slots__ = ("fire", "jobs", "skipped", "reason", "next_at", "missed")
    fire: bool  # the claimed job runs; False: it ends as ``skipped`` (``reason``)
    jobs: tuple[Job, ...]  # to insert as pending: missed ones to fire, then the next
    skipped: Job | None  # ends as the ``skipped`` history row (the claimed job when not fire)
    reason: str | None
    next_at: datetime  # the schedule's new ``next_at``
    missed: int  # occurrences that do not fire (``missed.CatchUp.skipped``)

    def __new__(cls, fire: bool, jobs: tuple[Job, ...], skipped: Job | None,
                reason: str | None, next_at: datetime, missed: int = 0) -> Rearm:
        s = _draft(cls)
        s.fire = fire
        s.jobs = jobs
        s.skipped = skipped
        s.reason = reason
        s.next_at = next_at
        s.missed = missed
        return _seal(s, cls)


def rule_of(s: Schedule) -> Rule:  # recurrence is imported only where schedules are used
    from ..recurrence import Rule

    return Rule(s.cron, s.every, s.start, s.zone)


def occurrence_job(s: Schedule, nominal: datetime, now: datetime) -> Job:
    """The pending job of ``s``'s occurrence at ``nominal``: in its slot, or the next one when
    that slot has begun (``missed.due_slot``)."""
    from ..missed import due_slot

    slot = due_slot(nominal, now, s.resolution)
    return s.template.replace(
        id=new_id(slot), first_check_at=slot, next_check_at=slot, check_count=0, attempt=0,
        status=Status.PENDING, created_at=now, updated_at=now, last_error=None,
        lease_owner=None, lease_until=None, started_at=None, idempotency_key=None,
        schedule=s.name, occurrence=nominal)


def is_due_rearm(s: Schedule | None, job: Job) -> bool:
    """Whether claiming ``job`` moves ``s`` on: the job is ``s``'s pending occurrence and ``s``
    is live (not paused, not removed). A job of another occurrence (``schedule run``, or one a
    catch-up made) or a claim taken over after its re-arm moves nothing."""
    return (s is not None and s.paused_at is None and job.occurrence is not None
            and s.next_at == job.occurrence)


def at_claim(s: Schedule, job: Job, now: datetime) -> Rearm:
    """The claim of ``job``, ``s``'s pending occurrence (``is_due_rearm``), at ``now``."""
    from ..missed import Missed, catch_up

    assert job.occurrence is not None
    # A catch-up's next occurrence may be made when its slot has begun (it sits in the slot
    # after): it was not missed then, and is missed only if its own slot passes unrun, not
    # because its nominal time is behind it. One already missed when made (a resume after
    # its time) is judged by its nominal time: the policy applies.
    step = timedelta(minutes=s.resolution)
    made = job.created_at or now
    late = job.first_check_at - slot_for(job.occurrence, s.resolution)
    fresh = job.occurrence > slot_for(made - step, s.resolution) - step
    d = catch_up(rule_of(s), job.occurrence, now - late if fresh and late > _ZERO else now,
                 policy=Missed(s.missed), resolution=s.resolution, window=s.window)
    jobs = tuple(occurrence_job(s, at, now) for at in (*d.extra, d.next))
    skipped: Job | None = None
    if not d.fire_claimed:
        skipped = job
    elif d.skipped:
        # The occurrences the claimed one stands for: a row of their own, with an id of now.
        skipped = job.replace(id=new_id(now))
    return Rearm(d.fire_claimed, jobs, skipped, d.reason, d.next, d.skipped)


class ClaimPlan(Record):
    """What a claim does to the schedules whose pending occurrences it took (``plan``)."""

    __slots__ = ("jobs", "alike", "skipped", "moves", "dropped")
    jobs: list[Job]  # to insert as pending
    # to insert as pending too: a job, and the (id, schedule) of each job made like it (the
    # same but for those two: ``rows``)
    alike: list[tuple[Job, list[tuple[str, str]]]]
    skipped: list[tuple[Job, str]]  # to end as ``skipped`` history rows, with their reason
    moves: list[tuple[datetime, str, datetime]]  # (new next_at, name, next_at claimed from)
    dropped: set[str]  # claimed ids that must not fire (they end as ``skipped``)

    def __new__(cls) -> ClaimPlan:
        s = _draft(cls)
        s.jobs, s.alike, s.skipped, s.moves, s.dropped = [], [], [], [], set()
        return _seal(s, cls)

    def rows(self, to_row: Callable[[Job, None], tuple[Any, ...]], columns: Sequence[str],
             derive: Callable[[list[Any]], tuple[Any, ...]] = tuple) -> list[tuple[Any, ...]]:
        """The rows of the jobs to insert, each ``to_row(job, None)``: a job made like another
        is the other's row with its own id and schedule in ``columns``' places (``derive``
        makes the row from them, e.g. a column computed from the id)."""
        out = [to_row(j, None) for j in self.jobs]
        at_id, at_name = columns.index("id"), columns.index("schedule")
        for job, others in self.alike:
            row = to_row(job, None)
            out.append(row)
            values = list(row)
            for job_id, name in others:
                values[at_id], values[at_name] = job_id, name
                out.append(derive(values))
        return out

    def whole(self) -> None:
        """Every job to insert in ``jobs``, those made alike too (for ``settle``: rare)."""
        for job, others in self.alike:
            self.jobs.append(job)
            self.jobs.extend(job.replace(id=job_id, schedule=name) for job_id, name in others)
        self.alike.clear()


def dry_run(store: Any, jobs: list[Job], now: datetime) -> tuple[dict[str, int], set[str]]:
    """What a claim of ``jobs`` at ``now`` would do to their schedules (nothing written): the
    counts of claimed occurrences the missed policy would not fire (``would_skip``; their ids
    are returned too), of missed ones it would fire in the next slot (``missed_would_fire``,
    policy all) and of the occurrences its ``skipped`` rows would count
    (``occurrences_skipped``)."""
    found: dict[str, Schedule] = {}
    out: dict[str, int] = {}
    dropped: set[str] = set()
    for job in jobs:
        if job.schedule is None:
            continue
        if job.schedule not in found:
            s = store.get_schedule(job.schedule)
            if s is None:
                continue
            found[job.schedule] = s
        s = found[job.schedule]
        if not is_due_rearm(s, job):
            continue
        r = at_claim(s, job, now)
        found[s.name] = s.replace(next_at=r.next_at)
        if not r.fire:
            dropped.add(job.id)
        for key, n in (("would_skip", not r.fire), ("missed_would_fire", len(r.jobs) - 1),
                       ("occurrences_skipped", r.missed)):
            if n:
                out[key] = out.get(key, 0) + int(n)
    return out, dropped


def plan(found: dict[str, Schedule], claimed: list[Job], now: datetime) -> ClaimPlan:
    """A claim's re-arming, decided once for both stores: ``found`` holds the schedule rows of
    the claimed jobs (locked by the store where it can); each store writes the plan in the
    claim's transaction, the moves as a compare and set on ``next_at``.

    An occurrence claimed on time (``on_time_after``: nothing can have been missed) moves its
    schedule to the rule's next occurrence, whatever the policy (``missed.catch_up``'s first
    answer), without asking the policy. Many schedules share a rule, a nominal time and often a
    template: the next occurrence is found once per rule and nominal time, and its job built
    once per template, nominal time and slot (each schedule's own job differs in its id and
    name only: ``ClaimPlan.alike``)."""
    from ..missed import due_slot

    out = ClaimPlan()
    on_time: dict[int, datetime] = {}
    # (rule, resolution, template, nominal time) -> for an occurrence claimed on time: its
    # next occurrence, the (id, name) list of the jobs made like the first of their kind
    # (``made``) and the list of those waiting for an id in its slot; None: not on time
    # (``at_claim`` decides). One look-up a claimed job, where its decision's parts were
    # looked up one by one (issue 34).
    kinds: dict[tuple[Any, ...], tuple[datetime, list[tuple[str, str]],
                                       list[tuple[list[tuple[str, str]], str]]] | None] = {}
    # (rule, resolution, nominal time) -> the next occurrence and its slot
    nexts: dict[tuple[Any, ...], tuple[datetime, datetime]] = {}
    # (template, nominal time, slot) -> the (id, name) of the jobs made like the first
    made: dict[tuple[Any, ...], list[tuple[str, str]]] = {}
    moved: dict[str, datetime] = {}  # next_at of the schedules moved so far
    # slot -> the jobs made like another, in claim order: (the other's list, schedule name)
    names: dict[datetime, list[tuple[list[tuple[str, str]], str]]] = {}
    for job in claimed:
        name = job.schedule
        if not name:
            continue
        s = found.get(name)
        if s is None:
            continue
        if name in moved:
            s = s.replace(next_at=moved[name])
        at = job.occurrence
        # Not ``s``'s pending occurrence: it moves nothing (``is_due_rearm``, asked in parts:
        # once here, then whether ``s`` is paused).
        if at is None or s.next_at != at:
            continue
        if s.paused_at is not None:
            # The occurrence pause cancelled, retried while paused (the user's ask): it fires,
            # and the schedule moves past it, making nothing, so that ``resume`` does not make
            # this occurrence again.
            from ..recurrence import next_occurrence

            nxt = next_occurrence(rule_of(s), at)
            out.moves.append((nxt, s.name, s.next_at))
            moved[s.name] = nxt
            continue
        key = (s.cron, s.every, s.start, s.zone, s.resolution, id(s.template), at)
        kind = kinds.get(key, _NONE)
        if kind is _NONE:
            after = on_time.get(s.resolution)
            if after is None:
                after = on_time[s.resolution] = on_time_after(now, s.resolution)
            kind = None
            if at > after:
                rule = key[:5] + (at,)
                got = nexts.get(rule)
                if got is None:
                    from ..recurrence import next_occurrence

                    nxt = next_occurrence(rule_of(s), at)
                    got = nexts[rule] = (nxt, due_slot(nxt, now, s.resolution))
                nxt, slot = got
                made_like = (id(s.template), nxt, slot)
                others = made.get(made_like)
                first = others is None
                if others is None:
                    others = made[made_like] = []
                kinds[key] = kind = (nxt, others, names.setdefault(slot, []))
                if first:  # occurrence_job(s, nxt, now), the first of its kind
                    out.alike.append((occurrence_job(s, nxt, now), others))
                    out.moves.append((nxt, name, at))
                    moved[name] = nxt
                    continue
            else:
                kinds[key] = None
        if kind is not None:
            # its id is made below, with the others of its slot (``ids.new_ids``)
            nxt, others, waiting = kind
            waiting.append((others, name))
        else:
            r = at_claim(s, job, now)
            out.jobs.extend(r.jobs)
            if r.skipped is not None:
                out.skipped.append((r.skipped, r.reason or "skipped"))
                if not r.fire:
                    out.dropped.add(job.id)
            nxt = r.next_at
        out.moves.append((nxt, name, at))
        moved[name] = nxt
    for slot, waiting in names.items():
        for (others, name), job_id in zip(waiting, new_ids(slot, len(waiting))):
            others.append((job_id, name))
    return out


def group_moves(moves: list[tuple[datetime, str, datetime]]
                ) -> dict[tuple[datetime, datetime], list[str]]:
    """A plan's moves by (new ``next_at``, claimed from): the names each moves."""
    out: dict[tuple[datetime, datetime], list[str]] = {}
    for new, name, old in moves:
        out.setdefault((new, old), []).append(name)
    return out


def on_time_after(now: datetime, resolution: int) -> datetime:
    """Occurrences after this instant, claimed at ``now``, were missed by no policy: the
    ``missed.missed_until`` of ``catch_up`` at ``now`` (``at_claim`` may ask at an earlier
    now, never a later one: its instant is never later either)."""
    from ..missed import missed_until

    return missed_until(now, resolution * 60)


# What the store holds for (schedule, occurrence): None (no job), "pending" or "in_flight".
Taken = Callable[[str, datetime], str | None]


def first_free(s: Schedule, at: datetime, taken: Taken) -> tuple[datetime, bool]:
    """``s``'s pending occurrence from ``at`` on, given the jobs the store holds, and whether
    its job is to be made. A job of ``at`` already pending is that occurrence's (nothing to
    make). One already in flight was claimed while it was not ``s``'s pending occurrence, so
    no claim will move ``s`` on from it: the occurrence after it is the pending one."""
    from ..recurrence import next_occurrence

    while True:
        state = taken(s.name, at)
        if state is None:
            return at, True
        if state != Status.IN_FLIGHT.value:
            return at, False
        at = next_occurrence(rule_of(s), at)


def settle(p: ClaimPlan, found: dict[str, Schedule], now: datetime, taken: Taken) -> None:
    """``p`` once an insert of its jobs hit the (schedule, occurrence) key: no job is made for
    an occurrence that has one (``first_free``), the schedules move to what is left."""
    p.whole()
    nexts = {(name, new) for new, name, _ in p.moves}
    jobs = []
    for j in p.jobs:
        name, at = j.schedule, j.occurrence
        assert name is not None and at is not None  # an occurrence's job (occurrence_job)
        if (name, at) not in nexts and taken(name, at) is None:
            jobs.append(j)
    for i, (new, name, old) in enumerate(p.moves):
        s = found[name]
        at, make = first_free(s, new, taken)
        if make and s.paused_at is None:  # a paused schedule has no pending occurrence
            jobs.append(occurrence_job(s, at, now))
        p.moves[i] = (at, name, old)
        found[name] = s.replace(next_at=at)
    p.jobs[:] = jobs
