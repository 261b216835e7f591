"""``awty schedule …``: recurring schedules (add, list, show, next, pause, resume, remove, run,
import-crontab). Each command parses, calls one ``Awty`` method and renders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..documents import schedule_dict
from ..errors import InvalidInput
from ..slots import iso, slot_for, slot_id
from . import render as r
from .options import (
    Call, Entity, Exec, Header, Home, Horizon, Json, Key, MaxAttempts, MaxChecks, MisfireGrace,
    Payload, Timeout, Utc, new_app, new_group, open_awty, reports_errors,
)
from .scheduleadd import run_schedule_add, show_schedule

commands = new_app()  # no plain commands: `schedule` is a group
schedule_app = new_group(help="""Recurring schedules: every occurrence is an ordinary awty job
(signed, retried, in history), fired once across any number of runners.

Examples:

  awty schedule add report https://example.com/hooks/report --cron '0 9 * * mon-fri' --tz Europe/Berlin

  awty schedule add backup 'restic backup ~' --exec --every 6h --missed all

  awty schedule list

  awty schedule next report -n 5

  crontab -l | awty schedule import-crontab - --apply
""")

Name = Annotated[str, typer.Argument(help="The schedule's name.", show_default=False)]


@schedule_app.command("add")
@reports_errors
def add(
    name: Name,
    target: Annotated[str, typer.Argument(
        help="Callback URL (default), shell command with --exec, module:function with --call.",
        show_default=False)],
    cron: Annotated[Optional[str], typer.Option(
        help="Five fields 'M H DoM Mon DoW' (lists, ranges, steps, names such as mon-fri), or "
             "@hourly @daily @weekly @monthly @yearly; wall times in --tz.")] = None,
    every: Annotated[Optional[str], typer.Option(
        help="Or an interval of elapsed time: 15m 2h 1d.")] = None,
    start: Annotated[Optional[str], typer.Option(
        help="With --every: the first occurrence (default: one interval from now).")] = None,
    tz: Annotated[Optional[str], typer.Option(
        help="IANA zone of the rule's wall times (default: the local zone).")] = None,
    missed: Annotated[Optional[str], typer.Option(
        help="Occurrences missed while no runner ran: once (default: one for all), all "
             "(each, oldest first), skip (none). What does not fire is in history as "
             "skipped.")] = None,
    missed_window: Annotated[Optional[str], typer.Option(
        help="With --missed all: how far back missed occurrences still fire (default 24h).")]
    = None,
    exec_: Exec = False,
    call: Call = False,
    payload: Payload = None,
    entity: Entity = None,
    key: Key = None,
    header: Header = None,
    max_checks: MaxChecks = None,
    horizon: Horizon = None,
    timeout: Timeout = None,
    max_attempts: MaxAttempts = None,
    misfire_grace: MisfireGrace = None,
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Add a recurring schedule; only its next occurrence is ever pending.

    Examples:

      awty schedule add digest https://example.com/hooks/digest --cron '0 9 * * mon-fri'

      awty schedule add sync 'make sync' --exec --every 2h --start 'today 13:00' --missed skip
    """
    run_schedule_add(name, target, cron=cron, every=every, start=start, tz=tz, missed=missed,
                     missed_window=missed_window, exec_=exec_, call=call, payload=payload,
                     entity=entity, key=key, header=header, max_checks=max_checks,
                     horizon=horizon, timeout=timeout, max_attempts=max_attempts,
                     misfire_grace=misfire_grace, as_json=as_json, utc=utc, home=home)


@schedule_app.command("list")
@reports_errors
def list_(as_json: Json = False, utc: Utc = False, home: Home = None) -> None:
    """Every schedule: its rule in words, zone, next occurrence, last outcome, paused.

    Example:  awty schedule list --json
    """
    infos = open_awty(home).schedules()
    if as_json:
        r.emit_json([schedule_dict(i) for i in infos])
        return
    r.table(None, ["name", "rule", "zone", "next", "last", "paused"], [
        [i.schedule.name, i.rule, i.schedule.zone,
         r.when(i.schedule.next_at, utc, short=True), i.last_outcome or "-",
         "paused" if i.schedule.paused_at else ""] for i in infos])


@schedule_app.command("show")
@reports_errors
def show(name: Name, as_json: Json = False, utc: Utc = False, home: Home = None) -> None:
    """A schedule in full: rule, policy, next occurrences, its jobs now, last outcome.

    Example:  awty schedule show report
    """
    show_schedule(open_awty(home), name, utc, as_json)


@schedule_app.command("next")
@reports_errors
def next_(name: Name,
          n: Annotated[int, typer.Option("-n", help="How many.")] = 10,
          as_json: Json = False, utc: Utc = False, home: Home = None) -> None:
    """The next occurrences, local and UTC, with the slot each fires in.

    Example:  awty schedule next report -n 5
    """
    a = open_awty(home)
    s = a.get_schedule(name)
    rows = [(at, slot_for(at, s.resolution)) for at in a.next_occurrences(name, n)]
    if as_json:
        r.emit_json([{"occurrence": iso(at), "slot": slot_id(slot)} for at, slot in rows])
        return
    from ..recurrence import zone

    r.table(None, [f"local ({s.zone})", "UTC", "slot"], [
        [at.astimezone(zone(s.zone)).strftime("%Y-%m-%d %H:%M %Z"),
         r.when(at, True, short=True), slot_id(slot)] for at, slot in rows])


@schedule_app.command("pause")
@reports_errors
def pause(name: Name, home: Home = None) -> None:
    """Stop a schedule: its pending occurrence is cancelled until resume.

    Example:  awty schedule pause report
    """
    open_awty(home).pause(name)
    r.out(f"paused {name}")


@schedule_app.command("resume")
@reports_errors
def resume(name: Name, home: Home = None) -> None:
    """Resume a paused schedule; occurrences missed meanwhile follow its --missed policy.

    Example:  awty schedule resume report
    """
    open_awty(home).resume(name)
    r.out(f"resumed {name}")


@schedule_app.command("remove")
@reports_errors
def remove(name: Name, home: Home = None) -> None:
    """Delete a schedule; its pending occurrences are cancelled.

    Example:  awty schedule remove digest
    """
    res = open_awty(home).remove_schedule(name)
    r.out(f"removed {name}" + (f" ({len(res.cancelled)} pending occurrence(s) cancelled)"
                               if res.cancelled else ""))


@schedule_app.command("run")
@reports_errors
def run(name: Name, as_json: Json = False, home: Home = None) -> None:
    """Fire the schedule's target now, like `awty run`; the next occurrence stays as it is.

    The run names its schedule but is none of its occurrences (body "occurrence": null, no
    X-Awty-Occurrence header), so it never collides with one.

    Example:  awty schedule run report
    """
    summary = open_awty(home).run_schedule(name)
    if as_json:
        r.emit_json(summary.to_dict())
    else:
        r.out(r.summary_line(summary.to_dict()))


@schedule_app.command("import-crontab")
@reports_errors
def import_crontab(
    source: Annotated[str, typer.Argument(help="A crontab file, or - for stdin.")] = "-",
    apply: Annotated[bool, typer.Option("--apply", help="Make the schedules (default: only "
                                        "print them).")] = False,
    home: Home = None,
) -> None:
    """Turn crontab lines into exec schedules: one printed a line, with its name; --apply
    makes them. Lines that cannot be carried over are listed with the reason (exit 1 if any).
    Then delete the imported lines from cron.

    Examples:

      crontab -l | awty schedule import-crontab -

      awty schedule import-crontab my.crontab --apply
    """
    from ..crontab_import import read_crontab

    text = _read(source)
    a = open_awty(home)
    entries, refused = read_crontab(text, {s.schedule.name for s in a.schedules()})
    for e in entries:
        zone = f" --tz {e.zone}" if e.zone else ""
        r.out(f"awty schedule add {e.name} {_quote(e.command)} --exec --cron '{e.cron}'{zone}"
              f"  # line {e.line}")
    for f in refused:
        r.err(f"awty: line {f.line} not carried over: {f.reason}: {f.text}")
    if apply:
        import os

        for e in entries:
            a.schedule(e.name, e.command, cron=e.cron, tz=e.zone, kind="exec",
                       _environ={**os.environ, **e.env})
        r.out(f"made {len(entries)} schedule(s); now delete those lines from cron")
    if refused:
        raise typer.Exit(1)


def _read(source: str) -> str:
    try:
        return sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"{source}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{source}: not UTF-8 text") from None


def _quote(command: str) -> str:
    import shlex

    return shlex.quote(command)
