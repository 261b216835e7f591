"""Commands that fire jobs: ``slots``, ``run-slot``, ``catchup`` (what cron runs), and ``run``
(named jobs, now)."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from typing import Annotated, Optional

import typer

from ..errors import InvalidInput
from . import render as r
from .options import Home, Json, Utc, new_app, open_awty, reports_errors
from .runslot import notify, progress_bar, slot_arg
from .runslot import run_slot as run_slot_body

commands = new_app()


@commands.command()
@reports_errors
def slots(as_json: Json = False, utc: Utc = False, home: Home = None) -> None:
    """Slots holding jobs, with counts (like atq). Past slots still holding work need
    `awty catchup`."""
    a = open_awty(home)
    now_slot = a.current_slot()
    rows = a.slots()
    from ..slots import iso, slot_id

    if as_json:
        r.emit_json([{"slot": slot_id(s), "at": iso(s), "jobs": n, "past": s <= now_slot}
                     for s, n in rows])
        return
    r.table(None, ["slot", "fires", "jobs", ""],
            ([slot_id(s), r.when(s, utc), n, "past: run `awty catchup`" if s < now_slot else ""]
             for s, n in rows))


@commands.command("run-slot")
@reports_errors
def run_slot(
    slot: Annotated[Optional[str], typer.Argument(
        help="Slot id YYYYMMDDHHMM (UTC); default: the boundary that just passed, then the "
             "past slots still holding work (a machine back from sleep), up to batch_size "
             "jobs of them.",
        show_default=False)] = None,
    shard: Annotated[Optional[str], typer.Option(help="i/n: run only shard i of n "
                                                 "(1-based), by hash of job id.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would fire.")] = False,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Fire a slot's jobs (what cron runs at every boundary): without SLOT, the slot just
    passed, then the late slots it finds (missed while the machine slept), oldest first.
    Quiet under cron unless something needs a human; a progress bar on a terminal.

    Examples:  awty run-slot   |   awty run-slot 202611221415 --shard 1/2
    """
    run_slot_body(open_awty, slot, shard, dry_run, as_json, home)


@commands.command("run")
@reports_errors
def run_now(
    ids: Annotated[list[str], typer.Argument(
        help="Pending job ids (any case) or unique prefixes of 6+ characters.",
        show_default=False)],
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Fire these pending jobs now, whatever their slot: try a webhook by hand. Signing,
    guards, history, re-checks and retries are those of a slot run; a job asked to "check
    again" (or retried) waits in its next slot. All or nothing: an unknown or ended job, or
    one a runner is delivering, is refused (exit 1) and nothing is sent. Exit 1 when a job
    failed.

    Examples:  awty run 01JD…   |   awty run 01JD… --json
    """
    # No notify_command: the failures of a run by hand reach the person who ran it.
    d = open_awty(home).run_now(ids).to_dict()
    if as_json:
        r.emit_json(d)
    else:
        for j in d["jobs"]:
            status = f" ({j['status']})" if j["status"] is not None else ""
            why = f": {j['reason']}" if j["reason"] else ""
            nxt = f", next check {j['next_check_at']}" if j["next_check_at"] else ""
            r.out(f"{j['id']} {j['outcome']}{status}{why}{nxt}")
    if d["outcomes"].get("failed"):
        raise typer.Exit(1)


@commands.command()
@reports_errors
def catchup(
    until: Annotated[Optional[str], typer.Option(help="Last slot to run (default: the "
                                                 "current one).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List slots and counts; change "
                                          "nothing.")] = False,
    misfire: Annotated[Optional[str], typer.Option(help="fire (default) or skip: end jobs "
                                                   "later than the grace as expired.")] = None,
    misfire_grace: Annotated[Optional[str], typer.Option(help="With --misfire skip: how late "
                                                         "is still fine (default: one slot).")]
    = None,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Run every past slot that still holds work, oldest first, then the current one
    (after downtime; cron runs it @reboot and hourly)."""
    from ..slots import parse_duration

    grace = None
    if misfire_grace is not None:
        try:
            grace = parse_duration(misfire_grace)
        except ValueError as e:
            raise InvalidInput(f"--misfire-grace: {e}") from None
    progress = progress_bar(as_json)
    a = open_awty(home, on_event=progress)
    started = a.clock.now()
    with progress or nullcontext():
        c = a.catchup(until=slot_arg(until), dry_run=dry_run, misfire=misfire,
                      misfire_grace=grace)
    d = c.to_dict()
    notify(a, "catchup", d, started)
    if as_json:
        r.emit_json(d)
        return
    if dry_run:
        for s in d["slots"]:
            r.out(r.dry_run_line(s))
        r.out(f"{len(d['slots'])} slot(s), {d['ran']} job(s): "
              + r.dry_run_outcomes(d["outcomes"]))
        return
    failed = d["outcomes"].get("failed", 0)
    if sys.stdout.isatty() or failed:
        line = (f"catchup: {len(d['slots'])} slot(s), ran {d['ran']} in {d['seconds']:.2f}s: "
                + (", ".join(f"{v} {k}" for k, v in sorted(d["outcomes"].items())) or "nothing"))
        (r.out if sys.stdout.isatty() else r.err)(line)
