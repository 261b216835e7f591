"""Missed occurrences of a schedule, decided as data: what fires, what is recorded as skipped.

Pure: no I/O, no clock. When an occurrence is claimed, the store asks ``catch_up`` which
occurrences were missed (machine down, runners stopped, the schedule paused) and applies the
answer in the transaction of the claim: the claimed occurrence fires or ends as skipped, the
missed ones to fire are made as jobs, one ``skipped`` history row says how many did not fire and
why, and the next occurrence is made pending.

An occurrence is missed when its slot passed more than ``grace`` ago (default one slot, as for
the ``misfire`` grace of one-off jobs) without it firing: a run that is merely slow or late by a
few seconds misses nothing. The policies:

- ``once`` (default, like systemd's ``Persistent=``): the claimed occurrence fires, standing
  for all; the others are skipped.
- ``all``: each missed occurrence fires, oldest first, within ``window`` (default 24 h) of now;
  older ones are skipped.
- ``skip``: none fires; all are skipped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum

from .errors import InvalidInput
from .record import Record, _draft, _seal
from .recurrence import Rule, finest_interval, local, next_occurrence, occurrences
from .slots import format_duration, parse_duration, slot_for

DEFAULT_WINDOW = 24 * 3600.0
# Missed occurrences are counted one by one up to this many (a year of a 1-minute rule is half a
# million): past it the history row says "more than".
COUNT_LIMIT = 10_000


class Missed(StrEnum):
    SKIP = "skip"
    ONCE = "once"
    ALL = "all"


class CatchUp(Record):
    """What to do at the claim of an occurrence (``catch_up``)."""

    __slots__ = ("fire_claimed", "extra", "skipped", "reason", "next")
    fire_claimed: bool  # the claimed occurrence runs; False: it ends as skipped
    extra: tuple[datetime, ...]  # missed occurrences to make as jobs now, oldest first
    # occurrences that do not fire, the claimed one included when it does not; counted up to
    # COUNT_LIMIT + 1 (then ``reason`` says "more than")
    skipped: int
    reason: str | None  # the ``skipped`` history row's text; None when nothing was skipped
    next: datetime  # the first occurrence not missed: the schedule's next pending one

    def __new__(cls, fire_claimed: bool, extra: tuple[datetime, ...], skipped: int,
                reason: str | None, next: datetime) -> CatchUp:
        s = _draft(cls)
        s.fire_claimed = fire_claimed
        s.extra = extra
        s.skipped = skipped
        s.reason = reason
        s.next = next
        return _seal(s, cls)


def parse_missed(text: str | Missed | None) -> Missed:
    if text is None:
        return Missed.ONCE
    try:
        return Missed(str(text).strip().lower())
    except ValueError:
        raise InvalidInput(f"missed: {text!r} is not one of skip, once, all") from None


def parse_window(text: str | float | None) -> float:
    """``--missed-window`` in seconds (default 24 h)."""
    if text is None:
        return DEFAULT_WINDOW
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise InvalidInput(f"missed-window: {e}") from None
    if seconds <= 0:
        raise InvalidInput("missed-window: must be more than zero")
    return seconds


def catch_up(rule: Rule, claimed: datetime, now: datetime, *, policy: Missed,
             resolution: int, window: float = DEFAULT_WINDOW,
             grace: float | None = None) -> CatchUp:
    """The decision at the claim of the occurrence due at ``claimed`` (its nominal time)."""
    step = resolution * 60
    cutoff = missed_until(now, step, grace)
    if claimed > cutoff:  # on time: nothing missed (nor anything after it, which is later)
        return CatchUp(True, (), 0, None, next_occurrence(rule, claimed))
    nxt = next_occurrence(rule, cutoff)
    if policy is Missed.ALL:
        return _all(rule, claimed, cutoff, nxt, now - timedelta(seconds=window), window)
    later = occurrences(rule, claimed, cutoff, COUNT_LIMIT + 1)
    if policy is Missed.ONCE:
        return CatchUp(True, (), len(later), _reason(rule, later, policy, nxt), nxt)
    skipped = [claimed, *later]
    return CatchUp(False, (), len(skipped), _reason(rule, skipped, policy, nxt), nxt)


def missed_until(now: datetime, step: int, grace: float | None = None) -> datetime:
    """Occurrences at or before this instant have a slot that passed more than ``grace``
    (default one slot of ``step`` seconds) before ``now``: they were missed."""
    grace = float(step) if grace is None else grace
    return _last_boundary_before(now - timedelta(seconds=grace), step)


def _all(rule: Rule, claimed: datetime, cutoff: datetime, nxt: datetime, oldest: datetime,
         window: float) -> CatchUp:
    if claimed >= oldest:
        fire = occurrences(rule, claimed, cutoff, COUNT_LIMIT)
        return CatchUp(True, tuple(fire), 0, None, _after_limit(rule, fire, nxt))
    old = [claimed, *occurrences(rule, claimed, min(cutoff, oldest - _TICK), COUNT_LIMIT)]
    # Those in the window fire: read from the window's start, not forward from a year ago.
    fire = occurrences(rule, max(claimed, oldest - _TICK), cutoff, COUNT_LIMIT)
    reason = _reason(rule, old, Missed.ALL, nxt,
                     f"older than the missed window ({format_duration(window)})")
    return CatchUp(False, tuple(fire), len(old), reason, _after_limit(rule, fire, nxt))


def _after_limit(rule: Rule, fire: list[datetime], nxt: datetime) -> datetime:
    """More to fire than one claim makes (``check_window`` keeps a window below that, but a
    DST day can add one): the next pending occurrence is the first not made, still missed, and
    its own claim makes the rest."""
    if len(fire) < COUNT_LIMIT:
        return nxt
    return next_occurrence(rule, fire[-1])


def check_window(rule: Rule, window: float) -> float:
    """A missed window of ``rule`` holding at most ``COUNT_LIMIT`` occurrences: a catch-up under
    ``all`` makes them as jobs in one transaction."""
    most = int(window // finest_interval(rule))
    if most > COUNT_LIMIT:
        raise InvalidInput(f"missed-window: {format_duration(window)} holds up to {most:,} "
                           f"occurrences of this rule; at most {COUNT_LIMIT:,} fire after "
                           "downtime: give a shorter window")
    return window


_TICK = timedelta(microseconds=1)


def _last_boundary_before(at: datetime, step: int) -> datetime:
    """The last slot boundary strictly before ``at``: an occurrence at or before it has its slot
    (the boundary at or after it) before ``at`` too."""
    boundary = slot_for(at, step // 60)
    return boundary - timedelta(seconds=step)


def _reason(rule: Rule, skipped: list[datetime], policy: Missed, nxt: datetime,
            why: str | None = None) -> str | None:
    """"3 occurrences missed 2027-03-28 03:00–05:00 (Europe/Berlin), policy once"."""
    if not skipped:
        return None
    n = len(skipped)
    first = local(rule, skipped[0])
    if n > COUNT_LIMIT:
        span = f"since {first:%Y-%m-%d %H:%M}"
        count = f"more than {COUNT_LIMIT:,} occurrences"
    else:
        last = local(rule, skipped[-1])
        span = f"{first:%Y-%m-%d %H:%M}" + (
            "" if n == 1 else f"–{last:%H:%M}" if last.date() == first.date()
            else f"–{last:%Y-%m-%d %H:%M}")
        count = f"{n} occurrence{'s' if n > 1 else ''}"
    text = f"{count} missed {span} ({rule.zone}), policy {policy.value}"
    return f"{text}: {why}" if why else text


def due_slot(nominal: datetime, now: datetime, resolution: int) -> datetime:
    """The slot a schedule's job is made in: its nominal time's, or, when that slot has already
    begun (a catch-up makes it late), the next one, so that a run still to come fires it."""
    slot = slot_for(nominal, resolution)
    if slot > now:
        return slot
    return slot_for(now.astimezone(UTC) + timedelta(microseconds=1), resolution)
