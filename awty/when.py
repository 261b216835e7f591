"""What people type for a time, read the way at(1) and systemd.time(7) read it. No I/O but
the local zone (``localzone``); ``slots`` re-exports ``parse_when``, ``parse_since``, ``to_utc``.

Accepted, case-insensitive (``future`` readings are for --at, ``past`` ones for --since):

- ``now``; epoch seconds (9–11 digits); ISO-8601 (``2026-12-01``, ``2026-12-01 09:00``,
  ``2026-12-01T09:00:00+01:00``, ``…Z``).
- relative: ``now + 2 hours``, ``+2h``, ``in 90 minutes``, ``2 hours ago``, ``now - 1d`` (any
  duration ``parse_duration`` reads: elapsed time, not wall time); ``next hour|day|week``.
- a clock time: a bare hour ``0``–``23``, ``09:00``, ``9:30:15``, ``9am``, ``12pm``, ``noon``,
  ``midnight``, ``teatime`` (16:00). Alone it is the next such time, today if it is still
  ahead, else tomorrow (a past reading: the last one, today or yesterday).
- a day: ``today``, ``tomorrow``, ``yesterday``; a weekday (``monday``, ``mon``: the coming one,
  today included while the time is still ahead; a past reading: the last one); ``next monday``
  (after today), ``last monday`` (before today); a date ``2026-12-01`` or ``2026/12/01``, and
  ``d/m/yyyy`` or ``m/d/yyyy`` only when one part is over 12 (or both are equal), so that it can
  be read one way only. A day alone is its midnight; with a clock time (in either order, ``at``
  allowed between) it is that time of that day.
- a trailing ``utc`` (or ``z``) reads the phrase in UTC instead of the local zone.
- anything else python-dateutil reads (``Nov 23 2026 9am``, ``1 Dec 2026 17:00 +01:00``); a date
  without a year is its next occurrence (a past reading: its last).

Refused, with a line saying how to write it: a bare number that is not an hour (``25``, ``930``),
``01/12/2026`` (1 December or 12 January?), dates with 2-digit years or no year in digits only,
a zone name dateutil cannot place (``9am EST``: give ``+01:00`` or ``utc``).

Wall times are turned into instants by ``to_utc`` in the zone's own rules: a time in a DST gap
moves forward by the gap, a repeated time takes its first occurrence.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo

_WEEKDAYS = {
    "monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2,
    "thursday": 3, "thu": 3, "thur": 3, "thurs": 3, "friday": 4, "fri": 4, "saturday": 5,
    "sat": 5, "sunday": 6, "sun": 6,
}
_NAMED_TIMES = {"noon": time(12), "midday": time(12), "midnight": time(0), "teatime": time(16)}
_DAY_WORDS = {"today": 0, "tomorrow": 1, "yesterday": -1}
_NEXT_UNITS = {"minute": 60, "hour": 3600, "day": 86400, "week": 604800}
# Patterns, compiled by re (and cached there) when first used: a plain `awty add --in 2h` or a
# batch of ISO times never needs them, and compiling them costs every start-up ~1 ms.
_CLOCK = r"(\d{1,2})(?::(\d{2})(?::(\d{2}))?)?(am|pm)?"
_NUMERIC_DATE = r"(\d{1,4})([/.-])(\d{1,2})(?:\2(\d{1,4}))?"
_RELATIVE = r"(?:now\s*)?([+-])\s*(.+)|in\s+(.+)|(.+?)\s+ago"
_EPOCH = r"\d{9,11}(\.\d+)?"
_EXAMPLES = "e.g. 2026-12-01 09:00, tomorrow 06:00, 9am, noon, now + 2 hours, next monday 9am"


def parse_when(text: str, now: datetime, local: tzinfo | None = None, *,
               past: bool = False) -> datetime:
    """The instant ``text`` names, in aware UTC. Wall times are in ``local`` (None: the
    process's zone, ``localzone.local_zone()``). A phrase that names a recurring time (``9``,
    ``noon``, ``monday``) is its next occurrence, or its last with ``past=True``."""
    if text[4:5] == "-" and text[:4].isdigit():  # ISO-8601 first: batches send thousands
        try:
            return to_utc(datetime.fromisoformat(text.strip().replace("Z", "+00:00")), local)
        except ValueError:
            pass
    s = _normalise(text)
    if not s:
        raise ValueError("empty time")
    if s == "now":
        return now
    if re.fullmatch(_EPOCH, s):
        return datetime.fromtimestamp(float(s), UTC)
    if s.isdigit() and len(s) > 2:
        raise ValueError(f"{text.strip()!r} is not a clear time: a bare number is an hour "
                         "(0-23); write a date as YYYY-MM-DD and a time as HH:MM")
    rel = re.fullmatch(_RELATIVE, s)
    if rel:
        return _relative(rel, now, text)
    if s.startswith("next ") and s[5:] in _NEXT_UNITS:
        return now + timedelta(seconds=_NEXT_UNITS[s[5:]])
    try:
        iso = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        pass
    else:
        return to_utc(iso, local)
    words = s.split()
    zone: tzinfo | None = local
    if len(words) > 1 and words[-1] in ("utc", "z"):
        words, zone = words[:-1], UTC
    if all(_shape(w) for w in words):
        return _phrase(words, now, zone, past, text)
    raw = text.split()  # dateutil knows zone names in capitals only (CET, UTC)
    return _dateutil(raw[:-1] if zone is UTC and local is not UTC else raw, now, zone, past, text)


def parse_since(text: str, now: datetime, local: tzinfo | None = None) -> datetime:
    """A start for read commands (``--since``): a duration ago (``1d``, ``2 hours``, ``PT2H``)
    or any time ``parse_when`` reads, in the past reading (``yesterday``, ``monday``, ``9``)."""
    from .slots import DurationOutOfRange, parse_duration

    s = text.strip()
    if (s[:1].isdigit() and not re.fullmatch(r"[\d.]+", s)) or re.match(r"(?i)p(\d|t)", s):
        try:
            return now - timedelta(seconds=parse_duration(s))
        except DurationOutOfRange:
            raise  # a duration all the same: no time reading would say better
        except ValueError:
            pass
    return parse_when(text, now, local, past=True)


def to_utc(dt: datetime, local: tzinfo | None = None) -> datetime:
    """An aware datetime as UTC; a naive one is wall time in ``local`` (None: the process's
    zone), resolved by the zone's rules: a wall time in a DST gap moves forward by the gap
    (Berlin 2026-03-29 02:30 is 03:30 CEST), a repeated one takes its first occurrence."""
    if dt.tzinfo is not None:
        return dt.astimezone(UTC)
    zone = local if local is not None else _local()
    aware = dt.replace(tzinfo=zone, fold=0)
    instant = aware.astimezone(UTC)
    if instant.astimezone(zone).replace(tzinfo=None) == dt:
        return instant  # exists; fold=0 is the first of a repeated hour
    # In a gap. Offsets a day either side give its size (PEP 495's fold=0 would give the
    # same answer for a ZoneInfo; other tzinfo classes are not bound to it).
    day, zero = timedelta(days=1), timedelta(0)
    after = (dt + day).replace(tzinfo=zone).utcoffset() or zero
    before = (dt - day).replace(tzinfo=zone).utcoffset() or zero
    return (dt + after - before).replace(tzinfo=zone, fold=0).astimezone(UTC)


def _local() -> tzinfo:
    from .localzone import local_zone

    return local_zone()


# --- the pieces --------------------------------------------------------------------------------
def _normalise(text: str) -> str:
    s = " ".join(str(text).lower().split())
    s = s.replace("a.m.", "am").replace("p.m.", "pm")
    return re.sub(r"(\d)\s+(am|pm)\b", r"\1\2", s)


def _relative(m: re.Match[str], now: datetime, text: str) -> datetime:
    from .slots import parse_duration

    sign, amount = (m.group(1), m.group(2)) if m.group(1) else \
        ("+", m.group(3)) if m.group(3) else ("-", m.group(4))
    try:
        seconds = parse_duration(amount)
    except ValueError as e:
        raise ValueError(f"{text.strip()!r}: {e}") from None
    return now + timedelta(seconds=seconds if sign == "+" else -seconds)


def _shape(word: str) -> bool:
    """Is ``word`` one the phrase grammar knows (its meaning is checked later)?"""
    return (word in _NAMED_TIMES or word in _DAY_WORDS or word in _WEEKDAYS
            or word in ("next", "last", "this", "at") or re.fullmatch(_CLOCK, word) is not None
            or re.fullmatch(_NUMERIC_DATE, word) is not None)


def _phrase(words: list[str], now: datetime, zone: tzinfo | None, past: bool,
            text: str) -> datetime:
    day: tuple[str, int] | None = None  # (how, a number: weekday, offset or date ordinal)
    clock: time | None = None
    i = 0
    while i < len(words):
        w = words[i]
        i += 1
        if w == "at":
            continue
        if w in ("next", "last", "this"):
            if i >= len(words) or words[i] not in _WEEKDAYS:
                raise ValueError(f"{text.strip()!r}: {w!r} goes with a weekday "
                                 f"(e.g. {w} monday 9am)")
            found = (w, _WEEKDAYS[words[i]])
            i += 1
        elif w in _WEEKDAYS:
            found = ("weekday", _WEEKDAYS[w])
        elif w in _DAY_WORDS:
            found = ("offset", _DAY_WORDS[w])
        elif re.fullmatch(_NUMERIC_DATE, w):
            found = ("date", _numeric_date(w).toordinal())
        else:
            if clock is not None:
                raise ValueError(f"{text.strip()!r}: two clock times")
            clock = _NAMED_TIMES.get(w) or _clock(w, text)
            continue
        if day is not None:
            raise ValueError(f"{text.strip()!r}: two days")
        day = found
    zone = zone if zone is not None else _local()
    today = now.astimezone(zone).date()
    at = clock or time(0)

    def on(d: date) -> datetime:
        return to_utc(datetime.combine(d, at), zone)

    if day is None:  # a clock time alone: the next (or last) one
        got = on(today)
        if not past and got < now:
            return on(today + timedelta(days=1))
        if past and got > now:
            return on(today - timedelta(days=1))
        return got
    kind, value = day
    if kind == "date":
        return on(date.fromordinal(value))
    if kind == "offset":
        return on(today + timedelta(days=value))
    wd = value  # a weekday: "weekday" or "this" (the coming one), "next", "last"
    ahead = (wd - today.weekday()) % 7
    behind = (today.weekday() - wd) % 7
    if kind == "next":
        return on(today + timedelta(days=ahead or 7))
    if kind == "last":
        return on(today - timedelta(days=behind or 7))
    if past:
        got = on(today - timedelta(days=behind))
        return got if got <= now else on(today - timedelta(days=behind + 7))
    got = on(today + timedelta(days=ahead))
    return got if got >= now else on(today + timedelta(days=ahead + 7))


def _clock(word: str, text: str) -> time:
    m = re.fullmatch(_CLOCK, word)
    assert m is not None
    h, mi, se = int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 0)
    half = m.group(4)
    if half:
        if not 1 <= h <= 12:
            raise ValueError(f"{text.strip()!r}: {word} is not a clock time (1-12 with am/pm)")
        h = h % 12 + (12 if half == "pm" else 0)
    if h > 23 or mi > 59 or se > 59:
        bare = m.group(2) is None and not half
        raise ValueError(f"{text.strip()!r} is not a clear time: " + (
            "a bare number is an hour (0-23); write a date as YYYY-MM-DD, a delay as --in 25h"
            if bare else f"{word} is not a clock time (00:00-23:59)"))
    return time(h, mi, se)


def _numeric_date(word: str) -> date:
    """A date in digits: year first (2026-12-01, 2026/12/01), or d/m/yyyy and m/d/yyyy when
    only one reading is a date."""
    m = re.fullmatch(_NUMERIC_DATE, word)
    assert m is not None
    a, b, c = m.group(1), m.group(3), m.group(4)
    how = "write dates as YYYY-MM-DD"
    try:
        if len(a) == 4 and c is not None:
            return date(int(a), int(b), int(c))
        if c is None or len(c) != 4 or len(a) > 2:
            raise ValueError(f"{word!r} is not a date awty can read: {how} "
                             "(with a 4-digit year)")
        x, y, year = int(a), int(b), int(c)
        if x == y or (x > 12 >= y):
            return date(year, y, x)
        if y > 12 >= x:
            return date(year, x, y)
        if x > 12 and y > 12:
            raise ValueError("no month over 12")
    except ValueError as e:
        if "awty" in str(e):
            raise
        raise ValueError(f"{word!r} is not a date: {how}") from None
    first, second = date(year, y, x), date(year, x, y)
    raise ValueError(f"{word!r} is ambiguous ({_day(first)} or {_day(second)}?): {how}, "
                     f"e.g. {first.isoformat()}")


def _day(d: date) -> str:
    return f"{d.day} {d:%B} {d.year}"


def _dateutil(words: list[str], now: datetime, zone: tzinfo | None, past: bool,
              text: str) -> datetime:
    """The long tail (month names, offsets, odd orders) through python-dateutil, with the
    digit-only dates checked first: dateutil would silently read 01/12/2026 as January."""
    import warnings

    from dateutil import parser as _parser  # lazy: ~60 ms of import

    words = [_numeric_date(w).isoformat() if re.fullmatch(_NUMERIC_DATE, w) else w for w in words]
    phrase = " ".join(words)
    zone = zone if zone is not None else _local()
    base = now.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", _parser.UnknownTimezoneWarning)
            dt = _parser.parse(phrase, default=base)
            other = _parser.parse(phrase, default=base.replace(day=1, year=base.year + 1))
    except _parser.UnknownTimezoneWarning:
        raise ValueError(f"{text.strip()!r}: a zone name awty cannot place; give an offset "
                         "(+01:00) or utc") from None
    except (ValueError, OverflowError):
        raise ValueError(f"not a time: {text.strip()!r} ({_EXAMPLES})") from None
    got = to_utc(dt, zone)
    if other.year != dt.year:  # no year given: the next (or last) occurrence
        step = -1 if past else 1
        if (got > now) if past else (got < now):
            try:
                got = to_utc(dt.replace(year=dt.year + step), zone)
            except ValueError:  # 29 February
                pass
    return got
