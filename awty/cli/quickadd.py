"""A plain ``awty add …`` or ``awty schedule add …`` without Typer: Typer and its Click cost
more than the whole add (issue 12, item 4: a crontab line or a script loop pays it on every
job; issue 32: ``schedule add`` within 1.2× of ``add``).

``read`` reads only what it is sure of: the options the command declares, spelled
``--opt value`` or ``--opt=value``, at most once each (``--header`` repeats), the command's
positional arguments, and ``--`` before the last of them when it starts with a dash. Anything
else (``--help``, a typo, a missing value, a non-integer ``--max-checks``, an argument too few
or too many) returns None and the Typer app parses it, so help and usage errors are exactly
the app's. The commands' bodies (``addjob.run_add``, ``scheduleadd.run_schedule_add``) are
shared with the app."""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

# The job options `add` and `schedule add` share: option -> the body's parameter
_JOB_VALUED = {"--payload": "payload", "--entity": "entity", "--key": "key",
               "--horizon": "horizon", "--timeout": "timeout", "--misfire-grace": "misfire_grace",
               "--home": "home", "--max-checks": "max_checks", "--max-attempts": "max_attempts"}
_JOB_FLAGS = {"--exec": "exec_", "--call": "call", "--json": "as_json", "--utc": "utc"}
# option -> run_add's parameter; each takes a value
_VALUED = {**_JOB_VALUED, "--at": "at", "--in": "in_", "--idempotency-key": "idempotency_key",
           "--batch": "batch"}
_FLAGS = {**_JOB_FLAGS, "--dry-run": "dry_run"}
# option -> run_schedule_add's parameter
_SCHEDULE_VALUED = {**_JOB_VALUED, "--cron": "cron", "--every": "every", "--start": "start",
                    "--tz": "tz", "--missed": "missed", "--missed-window": "missed_window"}
_INTS = ("max_checks", "max_attempts")


def read(args: list[str], valued: dict[str, str], flags: dict[str, str],
         most: int) -> tuple[list[str], dict[str, Any]] | None:
    """``args`` after the command's name -> (its positional arguments, at most ``most``, and
    its keyword arguments), or None when the Typer app must read them."""
    kw: dict[str, Any] = {}
    headers: list[str] = []
    given: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            if i != len(args) - 1:
                return None
            given.append(args[i])
            break
        if not a.startswith("-") or a == "-":
            given.append(a)
            continue
        name, eq, value = a.partition("=")
        if name in flags and not eq:
            if flags[name] in kw:
                return None
            kw[flags[name]] = True
            continue
        if name != "--header" and name not in valued:
            return None
        if not eq:
            if i == len(args) or args[i].startswith("-") and args[i] != "-":
                return None  # Click's reading of a dash-led value is the app's to give
            value = args[i]
            i += 1
        if name == "--header":
            headers.append(value)
            continue
        param = valued[name]
        if param in kw:
            return None
        if param in _INTS:
            try:
                kw[param] = int(value)
            except ValueError:
                return None
        elif param == "home":
            if not value:
                return None
            kw[param] = Path(value)
        else:
            kw[param] = value
    if len(given) > most:
        return None
    if headers:
        kw["header"] = headers
    return given, kw


def parse(args: list[str]) -> dict[str, Any] | None:
    """``args`` after ``add`` -> run_add's keyword arguments (``target`` included), or None
    when the Typer app must read them."""
    got = read(args, _VALUED, _FLAGS, 1)
    if got is None:
        return None
    given, kw = got
    kw["target"] = given[0] if given else None
    return kw


def parse_schedule_add(args: list[str]) -> dict[str, Any] | None:
    """``args`` after ``schedule add`` -> run_schedule_add's keyword arguments (``name`` and
    ``target`` included), or None when the Typer app must read them (NAME and TARGET are
    both required: one missing is the app's usage error)."""
    got = read(args, _SCHEDULE_VALUED, _JOB_FLAGS, 2)
    if got is None or len(got[0]) != 2:
        return None
    (kw := got[1]).update(name=got[0][0], target=got[0][1])
    return kw


def run(args: list[str]) -> bool:
    """Run ``awty add`` from ``args`` (after ``add``) when ``parse`` reads them; False when the
    Typer app must. Errors end the process as the app's commands end it."""
    from .session import reporting_errors, take_given

    kw = parse(take_given(args))
    if kw is None:
        return False
    from .addjob import run_add

    with reporting_errors():
        run_add(kw.pop("target"), **kw)
    return True


def run_schedule(args: list[str]) -> bool:
    """Run ``awty schedule add`` from ``args`` (after ``schedule add``), as ``run``."""
    from .argv import unpassable
    from .session import reporting_errors, take_given

    args = take_given(args)
    kw = parse_schedule_add(args)
    if kw is None or unpassable(args) is not None:
        return False
    from .scheduleadd import run_schedule_add

    with reporting_errors():
        run_schedule_add(kw.pop("name"), kw.pop("target"), **kw)
    return True
