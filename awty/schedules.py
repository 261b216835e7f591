"""Recurring schedules for the facade (``Awty.schedule`` and friends): reading what a user
gave into a ``model.Schedule`` and asking the store. The time rules are ``recurrence`` and
``missed``; what a claim does with a schedule is ``store.schedrules``'. Imported only by the
schedule commands, never on `awty add`'s path."""

from __future__ import annotations

from datetime import UTC, datetime

from .errors import InvalidInput, ScheduleExists, ScheduleNotFound
from .missed import Missed, check_window, parse_missed, parse_window
from .model import Schedule
from .record import Record, _draft, _seal
from .recurrence import (
    check_rule, describe, make_rule, occurrences, parse_name,
)
from .store.schedrules import rule_of

TYPE_CHECKING = False  # `typing` costs each start ~3 ms (`schedule add`); mypy reads it as True
if TYPE_CHECKING:
    from typing import Any

    from .model import Job, RunSummary

    # The facade that calls these (api.Awty): not imported, it imports this module.
    Awty = Any

# Job options a schedule's occurrences take (those of `awty add` but the time and the
# idempotency key: each occurrence is unique by its schedule and nominal time).
JOB_OPTIONS = frozenset({"kind", "payload", "payload_json", "entity", "key", "headers",
                         "max_checks", "horizon", "timeout", "max_attempts", "misfire_grace",
                         "cwd"})


class ScheduleInfo(Record):
    """A schedule as ``schedule list`` shows it."""

    __slots__ = ("schedule", "rule", "pending", "last_outcome", "last_at")
    schedule: Schedule
    rule: str  # the rule in words
    pending: int  # its jobs in the store now (pending or in flight)
    last_outcome: str | None
    last_at: datetime | None

    def __new__(cls, schedule: Schedule, rule: str, pending: int, last_outcome: str | None,
                last_at: datetime | None) -> ScheduleInfo:
        s = _draft(cls)
        s.schedule = schedule
        s.rule = rule
        s.pending = pending
        s.last_outcome = last_outcome
        s.last_at = last_at
        return _seal(s, cls)


def make(a: Awty, name: str, target: str, *, cron: str | None = None,
         every: Any = None, start: str | datetime | None = None, tz: str | None = None,
         missed: str | None = None, missed_window: Any = None,
         _environ: dict[str, str] | None = None, **job: Any) -> tuple[Schedule, Job]:
    """Validate everything, then keep the schedule and its first occurrence's job. Bad input
    raises ``InvalidInput`` naming the field, and nothing is stored."""
    from . import jobspec

    unknown = set(job) - JOB_OPTIONS
    if unknown:
        raise TypeError(f"schedule() got unexpected option(s) {', '.join(sorted(unknown))}")
    a.load_cluster()
    a._not_moved()
    now = a.clock.now()
    name = parse_name(name)
    if isinstance(start, str):
        start = _start(a, start, now)
    rule = make_rule(cron=cron, every=every, start=start, tz=tz, now=now)
    first = check_rule(rule, now=now, resolution=a.settings.resolution,
                       max_delay=a.settings.max_delay)
    policy = parse_missed(missed)
    window = parse_window(missed_window)
    if policy is Missed.ALL:
        check_window(rule, window)
    spec = {k: v for k, v in job.items() if v is not None}
    spec.update(target=target, **{"in": "1m"})  # the time is the rule's: any valid one here
    template, _ = jobspec.build(spec, now=now, settings=a.settings, local=a.tz,
                                cwd=job.get("cwd"), environ=_environ)
    if a.store.get_schedule(name) is not None:
        raise ScheduleExists(f"name: a schedule named {name!r} already exists")
    s = Schedule(name, rule.cron, rule.every, rule.start, rule.zone, policy.value, window,
                 a.settings.resolution, template, first, None, now)
    made = a.store.add_schedule(s, now)  # a job left of its first occurrence may move it on
    return s.replace(next_at=made.occurrence), made


def checked(s: Schedule, *, now: datetime, resolution: int, template: Job) -> Schedule:
    """A schedule given from outside (``awty import``) held to what ``make`` checks: its name,
    rule (no finer than this home's slots), zone, missed policy and window; ``template``
    already checked as a job. It takes this home's ``resolution``. Raises ``InvalidInput``
    naming the field."""
    if s.cron is not None and not isinstance(s.cron, str):
        raise InvalidInput("cron: must be text")
    if s.every is not None and (isinstance(s.every, bool) or not isinstance(s.every, int)):
        raise InvalidInput("every: must be whole seconds")
    if not isinstance(s.zone, str):
        raise InvalidInput("zone: must be a zone name")
    for k in ("next_at", "created_at"):
        if not isinstance(getattr(s, k), datetime):
            raise InvalidInput(f"{k}: missing")
    rule = make_rule(cron=s.cron, every=s.every, start=s.start if s.every is not None else None,
                     tz=s.zone, now=now)
    check_rule(rule, now=now, resolution=resolution, max_delay=float("inf"))
    policy = parse_missed(s.missed)
    window = parse_window(s.window)
    if policy is Missed.ALL:
        check_window(rule, window)
    return Schedule(parse_name(s.name), rule.cron, rule.every, rule.start, rule.zone,
                    policy.value, window, resolution, template, s.next_at, s.paused_at,
                    s.created_at)


def _start(a: Awty, text: str, now: datetime) -> datetime:
    from .when import parse_when

    try:
        return parse_when(text, now, a.tz)
    except (ValueError, OverflowError) as e:
        raise InvalidInput(f"start: {e}") from None


def get(a: Awty, name: str) -> Schedule:
    s: Schedule | None = a.store.get_schedule(name)
    if s is None:
        raise ScheduleNotFound(name)
    return s


def infos(a: Awty, *, after: str | None = None, limit: int | None = None,
          name: str | None = None) -> list[ScheduleInfo]:
    """The schedules by name (code point order on both stores, whatever a PostgreSQL
    collation would say, so a page's ``after`` cursor means the same on each): those after
    ``after``, at most ``limit``; or only ``name`` (``ScheduleNotFound`` if none)."""
    if name is not None:
        chosen = [get(a, name)]
    else:
        chosen = sorted(a.store.schedules(), key=lambda s: s.name)
        if after is not None:
            chosen = [s for s in chosen if s.name > after]
        chosen = chosen[:limit]
    last = a.store.schedule_outcomes() if chosen else {}
    return [ScheduleInfo(s, describe(rule_of(s)), len(a.store.schedule_jobs(s.name)),
                         *last.get(s.name, (None, None))) for s in chosen]


def next_occurrences(a: Awty, name: str, n: int = 10) -> list[datetime]:
    """The schedule's next ``n`` occurrences (nominal times, aware UTC), its pending one
    first."""
    if n < 1:
        raise InvalidInput("n: give at least 1")
    s = get(a, name)
    return [s.next_at, *occurrences(rule_of(s), s.next_at, limit=n - 1)]


def run(a: Awty, name: str) -> RunSummary:
    """A run now, beside the schedule's own occurrences (``awty run`` of a job made for it):
    it names the schedule but is none of its occurrences (``occurrence`` None). So the
    (schedule, occurrence) key never refuses it, at a rule occurrence's very second or twice
    in one second, a receiver deduplicating on the occurrence keeps it, and its claim moves
    the schedule on from nothing (``schedrules.is_due_rearm``)."""
    from .ids import new_id
    from .slots import current_slot

    s = get(a, name)
    a._not_moved()
    now = a.clock.now().astimezone(UTC).replace(microsecond=0)
    slot = current_slot(now, a.settings.resolution)
    job = s.template.replace(id=new_id(now), first_check_at=now, next_check_at=slot,
                             created_at=now, updated_at=now, schedule=s.name, occurrence=None)
    a.store.add([job], [None])
    summary: RunSummary = a.run_now([job.id])
    return summary
