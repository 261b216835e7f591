"""A plain ``awty run-slot …`` without Typer: what cron starts at every boundary, where the
parser's import and set-up (more than Python's own start-up) would come before the first
callback (issue 12, item 1).

``parse`` reads only what it is sure of: the options ``awty run-slot`` declares, spelled
``--opt value`` or ``--opt=value``, at most once each, and at most one SLOT. Anything else
(``--help``, a typo, a missing value, ``--``) returns None and the Typer app parses it, so help
and usage errors are exactly the app's. The command's body (``runslot.run_slot``) is shared."""

from __future__ import annotations

import sys
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
    False when the Typer app must. Errors end the process as ``options.reports_errors`` ends
    it, and what was opened is closed as it closes it."""
    from .argv import take_database_url

    args, database_url = take_database_url(args)
    kw = parse(args)
    if kw is None:
        return False
    from ..errors import AwtyError
    from . import render as r
    from .runslot import run_slot

    opened: list[Any] = []

    def open_awty(home: Path | None, **more: Any):
        from ..api import Awty

        if database_url is not None:
            more["database_url"] = database_url
        a = Awty(home, **more)
        opened.append(a)
        return a

    try:
        run_slot(open_awty, **kw)
    except AwtyError as e:
        r.err(f"awty: {e}")
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        r.err("awty: interrupted")
        sys.exit(130)
    finally:
        for a in opened:
            try:
                a.close()
            except Exception:  # noqa: BLE001 - best effort at exit, as the Typer path
                pass
    return True
