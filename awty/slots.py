"""Pure time math: slot rounding, slot ids, durations, time parsing. No I/O.

A slot is a boundary on the UTC epoch that is a multiple of the resolution R (minutes).
A job due at t belongs to slot ``ceil(t / R)``: it never fires before t and at most R after.
``run-slot`` with no argument runs ``floor(now / R)``, the boundary that just passed.
"""

from __future__ import annotations

import re
from functools import lru_cache
from datetime import UTC, datetime, timedelta

RESOLUTIONS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)
SLOT_FORMAT = "%Y%m%d%H%M"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def check_resolution(minutes: int) -> int:
    if minutes not in RESOLUTIONS:
        allowed = " ".join(map(str, RESOLUTIONS))
        raise ValueError(f"resolution must divide the hour: one of {allowed} (got {minutes})")
    return minutes


def _seconds(at: datetime) -> float:
    if at.tzinfo is None:
        raise ValueError("naive datetime: awty works in aware UTC datetimes")
    return (at - _EPOCH).total_seconds()


def slot_for(due: datetime, resolution: int) -> datetime:
    """The slot a job due at ``due`` fires in: the first boundary at or after it."""
    step = resolution * 60
    s = _seconds(due)
    n = -(-s // step)  # ceil for floats, exact on boundaries
    return _EPOCH + timedelta(seconds=int(n) * step)


def current_slot(now: datetime, resolution: int) -> datetime:
    """The boundary that has just passed (or is exactly now)."""
    step = resolution * 60
    return _EPOCH + timedelta(seconds=int(_seconds(now) // step) * step)


def next_slot_after(at: datetime, resolution: int) -> datetime:
    """The first boundary strictly after ``at``."""
    return current_slot(at, resolution) + timedelta(minutes=resolution)


def is_boundary(at: datetime, resolution: int) -> bool:
    return _seconds(at) % (resolution * 60) == 0


@lru_cache(maxsize=1024)
def slot_id(slot: datetime) -> str:
    return slot.astimezone(UTC).strftime(SLOT_FORMAT)


_SLOT_ID = re.compile(r"^\d{12}$")


def parse_slot_id(text: str) -> datetime:
    if not _SLOT_ID.match(text):
        raise ValueError(f"not a slot id (YYYYMMDDHHMM in UTC): {text!r}")
    try:
        return datetime.strptime(text, SLOT_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"not a slot id (YYYYMMDDHHMM in UTC): {text!r}") from None


# --- stored timestamps ---------------------------------------------------------------------
# One fixed-width UTC text form for every stored instant, so that text order is time order and
# an operator reading the database sees real times.
ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


@lru_cache(maxsize=4096)
def iso(at: datetime) -> str:
    # Cached: a batch stamps thousands of rows with the same few instants.
    text = at.astimezone(UTC).strftime(ISO_FORMAT)
    # glibc's %Y does not pad a year before 1000 ('272-05-04…'), which fromisoformat refuses:
    # a schedule started in year 272 (a start in the past sets the phase) made every read of
    # the schedules fail
    year = text.index("-")
    return text if year == 4 else text.zfill(len(text) + 4 - year)


def from_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def ceil_second(at: datetime) -> datetime:
    """Due times are kept to the second; rounding up keeps "never before the due time"."""
    if at.microsecond:
        return at.replace(microsecond=0) + timedelta(seconds=1)
    return at


# --- durations -----------------------------------------------------------------------------
_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604800),
}
_CALENDAR_UNITS = frozenset({"mo", "mon", "month", "months", "y", "yr", "yrs", "year", "years"})
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([a-z]+)")
_N = r"(\d+(?:[.,]\d+)?)"
_ISO_DURATION = re.compile(rf"p(?:{_N}w)?(?:{_N}d)?(?:t(?:{_N}h)?(?:{_N}m)?(?:{_N}s)?)?")
_DURATION_HELP = "e.g. 90s, 15m, 2h, 1h30m, 1d, 1w, '2 hours', '1 hour 30 minutes', PT2H, P1DT2H"
# Far more than any setting or option means, and far less than what overflows a timedelta or
# a date once added to now (`prune --older-than 99999999999w` was a traceback): refused.
MAX_DURATION = 1000 * 365 * 86400.0


class DurationOutOfRange(ValueError):
    """A duration that reads as one but is longer than ``MAX_DURATION`` (or not finite)."""


def parse_duration(text: str | int | float) -> float:
    """``90s 15m 2h 1d 1h30m 1w``, words (``2 hours``, ``1 hour 30 minutes``), ISO-8601
    (``PT2H``, ``P1DT2H``, ``P1W``) or a bare number of seconds -> seconds. Months and years
    have no fixed length and are refused; more than ``MAX_DURATION`` raises
    ``DurationOutOfRange`` (a ValueError), so that any date math on the result stays in range."""
    seconds = _parse_duration_text(text) if isinstance(text, str) else _parse_duration(text)
    if not seconds <= MAX_DURATION:  # (NaN too)
        raise DurationOutOfRange(f"not a duration: {_shown(text)} (more than 1000 years)")
    return seconds


def _shown(text: object) -> str:
    """``text`` for a message: the digits of "9" * 400 are no help to anyone."""
    try:
        shown = repr(text)
    except ValueError:  # an int past Python's digit limit
        return "a number of seconds"
    return shown if len(shown) <= 40 else shown[:30] + "…" + shown[-5:]


@lru_cache(maxsize=1024)
def _parse_duration_text(text: str) -> float:
    return _parse_duration(text)


def _parse_duration(text: str | int | float) -> float:
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int | float):
        if text < 0 or text != text:
            raise ValueError(f"not a duration: {text!r}")
        # (10**400 is more than a float holds: out of range all the same)
        return float(text) if text <= MAX_DURATION else float("inf")
    s = "".join(str(text).lower().split())
    if not s:
        raise ValueError("empty duration")
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    if s.startswith("p"):
        return _iso_duration(s, text)  # where "," is a decimal mark
    s = re.sub(r"and|,", "", s)  # 1 hour and 30 minutes, 1h, 30m
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        unit = m.group(2)
        if unit in _CALENDAR_UNITS:
            raise ValueError(f"not a duration: {text!r} (months and years have no fixed "
                             "length: use days or weeks)")
        if unit not in _UNITS:
            break
        total += float(m.group(1)) * _UNITS[unit]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ValueError(f"not a duration: {text!r} ({_DURATION_HELP})")
    return total


def _iso_duration(s: str, text: object) -> float:
    m = _ISO_DURATION.fullmatch(s)
    if m is None or s in ("p", "pt") or s.endswith("t"):
        if re.search(r"[ym]", s.split("t", 1)[0]):
            raise ValueError(f"not a duration: {text!r} (months and years have no fixed "
                             "length: use days, e.g. P30D)")
        raise ValueError(f"not a duration: {text!r} ({_DURATION_HELP})")
    weeks, days, hours, minutes, seconds = (float((g or "0").replace(",", "."))
                                            for g in m.groups())
    return weeks * 604800 + days * 86400 + hours * 3600 + minutes * 60 + seconds


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds == 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, seconds = divmod(seconds, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)



def parse_epoch_or_iso(value: object) -> datetime:
    """A machine-given instant (receivers' ``recheck_at``): epoch seconds or ISO-8601; an ISO
    time without an offset is taken as UTC, since a machine said it."""
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"\d+(\.\d+)?", s):
            return datetime.fromtimestamp(float(s), UTC)
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
        return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    raise ValueError(f"not a time: {value!r}")


def backoff_delay(attempt: int, backoff: tuple[float, ...]) -> float:
    """Delay before retry number ``attempt`` (1-based): the schedule, then its last step."""
    if not backoff:
        return 0.0
    return backoff[min(attempt, len(backoff)) - 1]
