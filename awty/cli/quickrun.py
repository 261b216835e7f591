"""A plain ``awty run-slot …`` without Typer: what cron starts at every boundary, where the
parser's import and set-up (more than Python's own start-up) would come before the first
callback (issue 12, item 1).

``parse`` reads only what it is sure of: the options ``awty run-slot`` declares, spelled
``--opt value`` or ``--opt=value``, at most once each, and at most one SLOT. Anything else
(``--help``, a typo, a missing value, ``--``) returns None and the Typer app parses it, so help
and usage errors are exactly the app's. The command's body (``runslot.run_slot``) is shared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# option -> run_slot's parameter
_VALUED = {"--shard": "shard", "--home": "home"}
_FLAGS = {"--dry-run": "dry_run", "--json": "as_json"}


def parse(args: list[str]) -> dict[str, Any] | None:
    """``args`` after ``run-slot`` -> run_slot's keyword arguments, or None when the Typer app
    must read them."""
    kw: dict[str, Any] = {"slot": None, "shard": None, "dry_run": False, "as_json": False,
                          "home": None}
    seen: set[str] = set()
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-"):
            if "slot" in seen:
                return None
            seen.add("slot")
            kw["slot"] = a
            continue
        name, eq, value = a.partition("=")
        param = _FLAGS.get(name) or _VALUED.get(name)
        if param is None or param in seen or (name in _FLAGS and eq):
            return None
        seen.add(param)
        if name in _FLAGS:
            kw[param] = True
            continue
        if not eq:
            if i == len(args) or args[i].startswith("-"):
                return None  # Click's reading of a missing or dash-led value is the app's
            value = args[i]
            i += 1
        if param == "home":
            if not value:
                return None
            kw[param] = Path(value)
        else:
            kw[param] = value
    return kw


def run(args: list[str]) -> bool:
    """Run ``awty run-slot`` from ``args`` (after ``run-slot``) when ``parse`` reads them;
    False when the Typer app must. Errors end the process, and what was opened is closed, as
    the app's commands do."""
    from .session import open_awty, reporting_errors, take_given

    kw = parse(take_given(args))
    if kw is None:
        return False
    from .runslot import run_slot

    with reporting_errors():
        run_slot(open_awty, **kw)
    return True
