"""Recurring schedules' time rules, pure: no I/O, no store, no clock (``now`` is an argument).

A rule is either a cron expression read in a zone (``--cron 'M H DoM Mon DoW'`` with lists,
ranges, steps and names, or ``@hourly @daily @weekly @monthly @yearly``) or an elapsed-time
interval on a grid (``--every 2h [--start TIME]``). Its occurrences are instants in aware UTC.

Time zones: cron fields name wall times. cronsim lists the wall times that match (naive, so that
its own zone handling stays out of it) and each becomes an instant by ``when.to_utc``, the rule of
``--at``: a wall time inside a DST gap moves forward by the gap (Berlin ``30 2 * * *`` on
2027-03-28 fires at 03:30 CEST, Lord Howe's moves 30 minutes), a repeated wall time fires once, at
its first occurrence. Two wall times that land on one instant (02:00 moved to 03:00, and 03:00
itself) are one occurrence. cronsim's own handling of an aware start follows Debian cron instead
(a gap's time fires at the gap's end, 03:00; a wildcard-hour rule fires the repeated hour twice),
and croniter's fires a repeated time twice: hence naive wall times and one rule for both.
An ``--every`` interval is elapsed time, untouched by DST.

The cron libraries are imported when a cron rule is first evaluated, never on `awty add`'s path.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache
from heapq import heappop, heappush

from .errors import InvalidInput
from .record import Record, _draft, _seal
from .slots import format_duration, parse_duration
from .when import to_utc

TYPE_CHECKING = False  # typing costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Iterator

    from cronsim import CronSim as _CronSim

# cron(5): each shorthand is the five fields it stands for. @reboot is not a schedule.
SHORTHANDS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
           ("day of week", 0, 7))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {3: _MONTHS, 4: _DAYS}
# One term of a field: a value or range (numbers or names), or *, with an optional /step.
_TERM = re.compile(r"(\*|[0-9a-z]+(?:-[0-9a-z]+)?)(?:/([0-9]+))?")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_DAY = timedelta(days=1)
_CRON_HELP = "five fields 'M H DoM Mon DoW', e.g. '0 9 * * mon-fri', or @hourly @daily @weekly " \
             "@monthly @yearly"


class Rule(Record):
    """When a schedule's occurrences fall. Exactly one of ``cron`` and ``every`` is set."""

    __slots__ = ("cron", "every", "start", "zone")
    cron: str | None  # five fields, shorthands spelled out, lower case, single spaces
    every: int | None  # seconds between occurrences (elapsed time)
    start: datetime | None  # ``every``: the first occurrence (aware UTC); the rest follow it
    zone: str  # IANA name: cron fields are wall times there; ``every`` only shows times in it

    def __new__(cls, cron: str | None, every: int | None, start: datetime | None,
                zone: str) -> Rule:
        s = _draft(cls)
        s.cron = cron
        s.every = every
        s.start = start
        s.zone = zone
        return _seal(s, cls)


# --- reading what people type ------------------------------------------------------------------
def parse_name(text: str) -> str:
    """A schedule's name: letters, digits, ``.``, ``_``, ``-``, at most 64, first a letter or
    digit (it appears in commands, headers and the exec environment unquoted)."""
    name = str(text).strip()
    if not _NAME.fullmatch(name):
        raise InvalidInput(f"name: {text!r} is not a schedule name (letters, digits, '.', '_' "
                           "and '-', starting with a letter or digit, at most 64)")
    return name


def parse_cron(text: str) -> str:
    """The standard cron expression ``text`` spelled as stored: a shorthand becomes its five
    fields, names lower case, single spaces. A bad one raises InvalidInput naming the field."""
    s = " ".join(str(text).lower().split())
    if s.startswith("@"):
        if s == "@reboot":
            raise InvalidInput("cron: @reboot runs at boot, not on a schedule (awty's own "
                               "@reboot line in cron runs the catch-up)")
        if s not in SHORTHANDS:
            raise InvalidInput(f"cron: unknown shorthand {text.strip()!r} ({_CRON_HELP})")
        return SHORTHANDS[s]
    fields = s.split(" ") if s else []
    if len(fields) == 6:
        raise InvalidInput(f"cron: {text.strip()!r} has six fields: awty's rules have no "
                           "seconds field (five fields 'M H DoM Mon DoW')")
    if len(fields) != 5:
        raise InvalidInput(f"cron: {text.strip()!r} is not a cron expression ({_CRON_HELP})")
    for i, field in enumerate(fields):
        _check_field(i, field, text)
    try:
        _cronsim(s)
    except ValueError:  # the fields are each fine: a day none of its months has (30 February)
        raise InvalidInput(f"cron: {text.strip()!r} never fires: none of its months has that "
                           "day") from None
    return s


def _check_field(i: int, field: str, text: str) -> None:
    """cronsim also reads the Quartz extensions (L, W, #) and a seconds field: awty keeps to
    the standard five fields, so that a rule means what crontab(5) says it means."""
    what, lo, hi = _FIELDS[i]
    names = _NAMES.get(i, ())

    def bad(why: str) -> InvalidInput:
        return InvalidInput(f"cron: {what} field {field!r} in {text.strip()!r}: {why}")

    for term in field.split(","):
        m = _TERM.fullmatch(term)
        if m is None:
            raise bad("not a value, range, list or step (e.g. 5, 1-5, 1,15, */10"
                      + (f", {names[1]}-{names[5]})" if i == 4 else ", jan-mar)" if i == 3
                         else ")"))
        if m.group(2) is not None and int(m.group(2)) == 0:
            raise bad("a step of 0")
        if m.group(1) == "*":
            continue
        values = []
        for word in m.group(1).split("-"):
            v = _value(word, names)
            if v is None:
                raise bad(f"{word!r} is not a {what}" + (
                    f" ({', '.join(names)} or {lo}-{hi})" if names else f" ({lo}-{hi})"))
            if not lo <= v <= hi:
                raise bad(f"{word} is out of range ({lo}-{hi})")
            values.append(v)
        if len(values) == 2 and values[0] > values[1]:
            raise bad(f"the range {m.group(1)} runs backwards")


def _value(word: str, names: tuple[str, ...]) -> int | None:
    if word.isdigit():
        return int(word)
    if word in names:
        return names.index(word) + (1 if names is _MONTHS else 0)
    return None


def parse_zone(name: str | None) -> str:
    """The IANA name of a zone (``None``: the local zone's). Unknown names raise
    InvalidInput; a local zone known only by a POSIX rule has no name to store."""
    if name is None:
        from .localzone import local_zone

        local = local_zone()
        key = "UTC" if local is UTC else getattr(local, "key", None)
        if not key or not _loads(key):
            raise InvalidInput("tz: the local time zone has no IANA name to keep with the "
                               "schedule: give one, e.g. --tz Europe/Berlin")
        return str(key)
    text = str(name).strip()
    if text.upper() in ("UTC", "Z"):
        return "UTC"
    if not _loads(text):
        raise InvalidInput(f"tz: unknown time zone {text!r} (an IANA name such as "
                           "Europe/Berlin or America/New_York, or UTC)")
    return text


def _loads(key: str) -> bool:
    try:
        zone(key)
    except (ValueError, KeyError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return False
    return True


@lru_cache(maxsize=64)
def zone(name: str) -> tzinfo:
    """The tzinfo for a stored zone name."""
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def make_rule(*, cron: str | None = None, every: str | float | None = None,
              start: datetime | None = None, tz: str | None = None,
              now: datetime) -> Rule:
    """A rule from what a user gave: ``cron`` or ``every`` (a duration), ``start`` (with
    ``every`` only: its first occurrence, default one interval after ``now``; a start in the
    past only sets the phase) and ``tz`` (default the local zone). Bad input raises
    InvalidInput naming the field."""
    if (cron is None) == (every is None):
        raise InvalidInput("give either --cron or --every" if cron is None else
                           "give --cron or --every, not both")
    zone_name = parse_zone(tz)
    if cron is not None:
        if start is not None:
            raise InvalidInput("start: goes with --every (a cron rule's times are its fields)")
        return Rule(parse_cron(cron), None, None, zone_name)
    try:
        seconds = parse_duration(every)  # type: ignore[arg-type]  # no cron: every is given
    except ValueError as e:
        raise InvalidInput(f"every: {e}") from None
    if seconds < 1:
        raise InvalidInput(f"every: {every!r} is no interval: give one of at least a minute")
    if start is not None and start.tzinfo is None:
        raise ValueError("start: naive datetime: give an aware one")
    step = int(round(seconds))
    anchor = (start if start is not None else now + timedelta(seconds=step)).astimezone(UTC)
    return Rule(None, step, anchor.replace(microsecond=0), zone_name)


def check_rule(rule: Rule, *, now: datetime, resolution: int, max_delay: float) -> datetime:
    """A new schedule's first occurrence (at or after ``now``), once the rule is known to fit
    this home: occurrences no closer than one slot, the first within ``max_delay``."""
    finest = finest_interval(rule)
    if finest < resolution * 60:
        given = f"--cron '{rule.cron}'" if rule.cron else f"--every {format_duration(finest)}"
        raise InvalidInput(f"{'cron' if rule.cron else 'every'}: {given} fires "
                           f"{format_duration(finest)} apart, finer than this home's "
                           f"{resolution}-minute slots (resolution {resolution})")
    try:
        first = next_occurrence(rule, now, inclusive=True)
    except LookupError:
        raise InvalidInput(f"cron: '{rule.cron}' never fires") from None
    if (first - now).total_seconds() > max_delay:
        raise InvalidInput(f"{'cron' if rule.cron else 'start'}: the first occurrence, "
                           f"{local(rule, first):%Y-%m-%d %H:%M %Z}, is beyond max_delay "
                           f"({format_duration(max_delay)} from now)")
    return first


def finest_interval(rule: Rule) -> float:
    """The least time, in seconds, between two wall-clock occurrences. A cron rule's comes from
    its minute and hour fields (the next minute in the same hour, or in the hour after).
    A time moved by DST can land nearer the next (Lord Howe's hourly rule: 02:00 moves to
    02:30, half an hour before 03:00): two occurrences may then share a slot, each its own job."""
    if rule.every is not None:
        return float(rule.every)
    assert rule.cron is not None
    sim = _cronsim(rule.cron)
    minutes, hours = sorted(sim.minutes), set(sim.hours)
    gaps = [b - a for a, b in zip(minutes, minutes[1:], strict=False)]
    if any((h + 1) % 24 in hours for h in hours):  # two adjacent hours: the wrap counts
        gaps.append(60 - minutes[-1] + minutes[0])
    return 60.0 * min(gaps) if gaps else 3600.0


# --- occurrences ---------------------------------------------------------------------------
def next_occurrence(rule: Rule, after: datetime, *, inclusive: bool = False) -> datetime:
    """The first occurrence after ``after`` (at or after, with ``inclusive``), aware UTC.
    Raises LookupError when a cron rule has none within 50 years. Cached: at a claim, many
    schedules share a rule and a nominal time."""
    if inclusive:
        after -= timedelta(microseconds=1)
    return _next(rule, after.astimezone(UTC))


@lru_cache(maxsize=4096)
def _next(rule: Rule, after: datetime) -> datetime:
    for at in _instants(rule, after):
        return at
    raise LookupError(f"no occurrence of {rule.cron!r} after {after:%Y-%m-%d}")


def occurrences(rule: Rule, after: datetime, until: datetime | None = None,
                limit: int | None = None) -> list[datetime]:
    """The occurrences after ``after`` up to ``until`` (inclusive), at most ``limit``, oldest
    first. One of ``until`` and ``limit`` must be given."""
    if until is None and limit is None:
        raise ValueError("occurrences: give until or limit")
    out: list[datetime] = []
    if limit is not None and limit <= 0:
        return out
    for at in _instants(rule, after.astimezone(UTC)):
        if until is not None and at > until:
            break
        out.append(at)
        if limit is not None and len(out) >= limit:
            break
    return out


def _instants(rule: Rule, after: datetime) -> Iterator[datetime]:
    """Every occurrence strictly after ``after`` (aware UTC), in order, each once."""
    if rule.every is not None:
        assert rule.start is not None
        step = timedelta(seconds=rule.every)
        at = rule.start + max(0, (after - rule.start) // step + 1) * step
        while True:
            yield at
            at += step
    assert rule.cron is not None
    yield from _cron_instants(rule.cron, zone(rule.zone), after)


def _cron_instants(cron: str, tz: tzinfo, after: datetime) -> Iterator[datetime]:
    """A wall time w becomes the instant w - offset, the offset being w's own (the first one
    for a repeated time, the one before the gap for a skipped time). So no w before
    ``after + least offset`` lands after ``after``, and none after w lands before
    ``w - greatest offset``: the wall times are read from there, and each instant is given out
    once no later wall time can come before it (in a gap, 02:30 lands after 03:00 does)."""
    if tz is UTC:
        for w in _cronsim(cron, after.replace(tzinfo=None)):
            yield w.replace(tzinfo=UTC)
        return
    known = after.replace(tzinfo=None)  # offsets are known for wall times a day either side
    least, greatest = _offsets(tz, known)
    walls = _cronsim(cron, (after + least).replace(tzinfo=None))
    pending: list[datetime] = []
    last = after
    for w in walls:
        at = to_utc(w, tz)
        if at > last:
            heappush(pending, at)
        if w > known + _DAY:
            known = w
            _, greatest = _offsets(tz, w)
        settled = (w - greatest).replace(tzinfo=UTC)
        while pending and pending[0] <= settled:
            at = heappop(pending)
            if at > last:
                last = at
                yield at
    while pending:  # cronsim gave up (no match within 50 years): what is left is in order
        at = heappop(pending)
        if at > last:
            last = at
            yield at


def _offsets(tz: tzinfo, wall: datetime) -> tuple[timedelta, timedelta]:
    """The least and greatest UTC offsets of wall times from a day before ``wall`` to two
    after: every offset a wall time up to a day from ``wall`` can have (zones change a few
    times a year; Samoa's skipped day, 2011-12-30, is within the span too)."""
    got = [(wall + timedelta(days=d)).replace(tzinfo=tz).utcoffset() or timedelta(0)
           for d in (-1, 0, 1, 2)]
    return min(got), max(got)


def _cronsim(cron: str, start: datetime | None = None) -> _CronSim:
    from cronsim import CronSim, CronSimError  # lazy: not on `awty add`'s path

    try:
        return CronSim(cron, start or datetime(2000, 1, 1))
    except CronSimError as e:
        raise ValueError(str(e)) from None


# --- showing a rule ----------------------------------------------------------------------------
def local(rule: Rule, at: datetime) -> datetime:
    """An instant as wall time in the rule's zone (aware)."""
    return at.astimezone(zone(rule.zone))


def describe(rule: Rule) -> str:
    """The rule in words: "At 09:00, Monday through Friday", "Every 2h"."""
    if rule.every is not None:
        return f"Every {format_duration(rule.every)}"
    assert rule.cron is not None
    return _describe_cron(rule.cron)


@lru_cache(maxsize=256)
def _describe_cron(cron: str) -> str:
    from cron_descriptor import ExpressionDescriptor, Options  # lazy: ~170 ms of import

    options = Options()
    # English and a 24-hour clock whatever the process's locale: awty speaks English, and a
    # wall time reads the same in every other output of awty.
    options.locale_code = "en_US"
    options.use_24hour_time_format = True
    return str(ExpressionDescriptor(cron, options).get_description())
