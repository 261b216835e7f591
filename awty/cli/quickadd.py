"""A plain ``awty add …`` without Typer: Typer and its Click cost more than the whole add
(issue 12, item 4: a crontab line or a script loop pays it on every job).

``parse`` reads only what it is sure of: the options ``awty add`` declares, spelled
``--opt value`` or ``--opt=value``, at most once each (``--header`` repeats), one TARGET, and
``--`` before a TARGET that starts with a dash. Anything else (``--help``, a typo, a missing
value, a non-integer ``--max-checks``) returns None and the Typer app parses it, so help and
usage errors are exactly the app's. The command's body (``addjob.run_add``) is shared."""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

# option -> run_add's parameter; each takes a value
_VALUED = {"--at": "at", "--in": "in_", "--payload": "payload", "--entity": "entity",
           "--key": "key", "--idempotency-key": "idempotency_key", "--horizon": "horizon",
           "--timeout": "timeout", "--misfire-grace": "misfire_grace", "--batch": "batch",
           "--home": "home", "--max-checks": "max_checks", "--max-attempts": "max_attempts"}
_INTS = ("max_checks", "max_attempts")
_FLAGS = {"--exec": "exec_", "--call": "call", "--dry-run": "dry_run", "--json": "as_json",
          "--utc": "utc"}


def parse(args: list[str]) -> dict[str, Any] | None:
    """``args`` after ``add`` -> run_add's keyword arguments (``target`` included), or None
    when the Typer app must read them."""
    kw: dict[str, Any] = {}
    headers: list[str] = []
    target: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            if target is not None or i != len(args) - 1:
                return None
            target = args[i]
            break
        if not a.startswith("-") or a == "-":
            if target is not None:
                return None
            target = a
            continue
        name, eq, value = a.partition("=")
        if name in _FLAGS and not eq:
            if _FLAGS[name] in kw:
                return None
            kw[_FLAGS[name]] = True
            continue
        if name != "--header" and name not in _VALUED:
            return None
        if not eq:
            if i == len(args) or args[i].startswith("-") and args[i] != "-":
                return None  # Click's reading of a dash-led value is the app's to give
            value = args[i]
            i += 1
        if name == "--header":
            headers.append(value)
            continue
        param = _VALUED[name]
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
    if headers:
        kw["header"] = headers
    kw["target"] = target
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
