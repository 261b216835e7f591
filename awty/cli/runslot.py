"""The body of ``awty run-slot``, free of Typer: the Typer command (``runs.run_slot``) and the
quick path for a plain ``awty run-slot`` (``quickrun``) both run it, so that cron's run, which
waits on every millisecond before its first callback, never imports the parser it does not
need. ``catchup`` shares the reporting helpers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from . import render as r

if TYPE_CHECKING:
    from ..api import Awty


def run_slot(open_awty: Callable[..., Awty], slot: str | None, shard: str | None,
             dry_run: bool, as_json: bool, home: Path | None) -> None:
    """``open_awty(home, on_event=…)`` opens the ``Awty`` (the caller closes it)."""
    progress = progress_bar(as_json)
    a = open_awty(home, on_event=progress)
    started = a.clock.now()
    with progress or nullcontext():
        s = a.run_slot(slot_arg(slot), shard=parse_shard(shard), dry_run=dry_run)
    d = s.to_dict()
    report_slot(d, as_json)
    notify(a, "run-slot", d, started)


def slot_arg(text: str | None) -> datetime | None:
    """A ``YYYYMMDDHHMM`` slot id from the command line -> its datetime (None stays None)."""
    if text is None:
        return None
    from ..slots import parse_slot_id

    try:
        return parse_slot_id(text)
    except ValueError as e:
        raise InvalidInput(str(e)) from None


def notify(a: Awty, run: str, summary: dict[str, Any], started: datetime) -> None:
    """The notify_command setting, when the run had failures, and the metrics_file setting;
    if either fails, stderr says so (cron mails it) and the run's exit code stays what the
    run earned."""
    from ..notify import after_run

    sent = after_run(a, run, summary, started)
    if sent is not None and sent.error:
        r.err(f"awty: notify_command {sent.error}")
    if a.settings.metrics_file and not summary.get("dry_run"):
        from ..metricsfile import write

        problem = write(a)
        if problem:
            r.err(f"awty: {problem}")


def report_slot(d: dict[str, Any], as_json: bool) -> None:
    if as_json:
        r.emit_json(d)
        return
    if d.get("busy"):
        r.err(f"awty: slot {d['slot']} is already being run ({d['busy']}); nothing to do")
    elif d.get("dry_run"):
        r.out(r.dry_run_line(d))
    else:
        _report_ran(d, "")
    for late in d.get("late") or ():  # a busy late slot is another runner's: nothing to say
        if not late.get("busy"):
            _report_ran(late, "late ")


def _report_ran(d: dict[str, Any], what: str) -> None:
    if sys.stdout.isatty():
        r.out(what + r.summary_line(d))
    elif d["outcomes"].get("failed") or d.get("rejected"):
        r.err(f"awty: {what}{r.summary_line(d)} (see `awty history --outcome failed`)")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InvalidInput(f"--shard {text!r}: use i/n, e.g. 1/4") from None
    if not (1 <= i <= n):
        raise InvalidInput(f"--shard {text!r}: need 1 <= i <= n")
    return (i - 1, n)


def progress_bar(as_json: bool) -> r.Progress | None:
    if as_json or not sys.stdout.isatty():
        return None
    return r.Progress()
