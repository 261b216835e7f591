"""Which time zone "local" is: the zone's own rules (zoneinfo), never libc's guess.

libc's mktime() guesses for a wall time in a DST gap (an hour early in Europe/Berlin, the
previous day in Africa/Cairo); a ``ZoneInfo`` answers by PEP 495's rules, which ``when.to_utc``
relies on. The zone is found as libc finds it: ``TZ`` (an IANA key such as ``Europe/Berlin``,
with or without a leading colon, or the path of a TZif file), else ``/etc/localtime``, else UTC.
A POSIX rule string that names no zone file (``CET-1CEST,M3.5.0,M10.5.0/3``) is read by
python-dateutil; a ``TZ`` nothing can read is UTC, as glibc takes it.
"""

from __future__ import annotations

import os
from datetime import UTC, tzinfo
from functools import lru_cache

LOCALTIME = "/etc/localtime"


def local_zone() -> tzinfo:
    """The local zone for this process (``TZ`` is read each call; zones are cached)."""
    return zone_for(os.environ.get("TZ"), LOCALTIME)


@lru_cache(maxsize=16)
def zone_for(tz_env: str | None, localtime: str = LOCALTIME) -> tzinfo:
    """The zone a ``TZ`` value names (None: unset, so ``localtime`` decides)."""
    from zoneinfo import ZoneInfo

    if tz_env is None:
        return _from_file(localtime) or UTC
    name = tz_env[1:] if tz_env.startswith(":") else tz_env
    if not name:
        return UTC
    if name.startswith("/"):
        return _from_file(name) or UTC
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):  # ZoneInfoNotFoundError is a KeyError
        pass
    from dateutil import tz as _tz  # lazy (~50 ms): only for a bare POSIX rule string

    try:
        rule: tzinfo = _tz.tzstr(name)
    except ValueError:
        return UTC
    return rule


def _from_file(path: str) -> tzinfo | None:
    """A TZif file as a ZoneInfo, by its IANA key when it lives in a zoneinfo tree (so that
    the zone keeps its name), else read from the file itself."""
    from zoneinfo import ZoneInfo

    real = os.path.realpath(path)
    marker = "/zoneinfo/"
    if marker in real:
        try:
            return ZoneInfo(real.rsplit(marker, 1)[1])
        except (ValueError, OSError, KeyError):
            pass
    try:
        with open(path, "rb") as f:
            return ZoneInfo.from_file(f, key=os.path.basename(real))
    except (OSError, ValueError):
        return None
