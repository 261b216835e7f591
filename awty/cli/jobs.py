"""Commands on jobs: ``add``, ``cancel``, ``reschedule``, ``list``, ``show``, ``history``,
``retry``. Each one parses, calls one ``Awty`` method and renders; nothing else lives here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any, Optional

import typer

from ..errors import InvalidInput
from ..ids import runner_label
from . import render as r
from .addjob import run_add
from .options import (
    Call, Entity, Exec, Header, Home, Horizon, Json, Key, MaxAttempts, MaxChecks, MisfireGrace,
    Payload, Timeout, Utc, new_app, open_awty, reports_errors, slot_arg,
)

commands = new_app()


@commands.command()
@reports_errors
def add(
    target: Annotated[Optional[str], typer.Argument(
        help="Callback URL (default), shell command with --exec, module:function with --call.",
        show_default=False)] = None,
    at: Annotated[Optional[str], typer.Option(help="When: ISO-8601, 'tomorrow 9am', epoch "
                                              "seconds or 'now'. Local time unless an offset "
                                              "is given.")] = None,
    in_: Annotated[Optional[str], typer.Option("--in", help="After a duration: 90s 15m 2h 1d "
                                               "1h30m 1w.")] = None,
    exec_: Exec = False,
    call: Call = False,
    payload: Payload = None,
    entity: Entity = None,
    key: Key = None,
    idempotency_key: Annotated[Optional[str], typer.Option(
        help="Adding the same job twice with this key returns the first one.")] = None,
    header: Header = None,
    max_checks: MaxChecks = None,
    horizon: Horizon = None,
    timeout: Timeout = None,
    max_attempts: MaxAttempts = None,
    misfire_grace: MisfireGrace = None,
    batch: Annotated[Optional[str], typer.Option(
        help="Add many: a file (or -) of JSON lines with keys named like these options.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and show, store "
                                          "nothing.")] = False,
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Schedule a job: an HTTP callback (default), a command (--exec) or a function (--call).

    Examples:

      awty add https://api.example.com/hooks/order --in 2h --entity order --key 42

      awty add 'notify-send done' --exec --at 'tomorrow 09:00'

      awty add myapp.checks:order_shipped --call --in 3h --payload '{"order": 42}'

      awty add --batch jobs.jsonl

    A --call function gets the job with the HTTP body's fields (id, entity, key, payload,
    check, attempt, slot, first_check_at) and runs in awty's own Python, with this directory
    first on sys.path (so install awty in the app's virtualenv, not pipx):

    \b
      def order_shipped(job):  # myapp/checks.py
          # None: done; a timedelta or datetime: check again; an exception: retried
          return None if job.payload.get("shipped") else timedelta(hours=2)
    """
    run_add(target, at=at, in_=in_, exec_=exec_, call=call, payload=payload, entity=entity,
            key=key, idempotency_key=idempotency_key, header=header, max_checks=max_checks,
            horizon=horizon, timeout=timeout, max_attempts=max_attempts,
            misfire_grace=misfire_grace, batch=batch, dry_run=dry_run, as_json=as_json,
            utc=utc, home=home)


@commands.command()
@reports_errors
def cancel(
    ids: Annotated[Optional[list[str]], typer.Argument(help="Job ids.", show_default=False)]
    = None,
    entity: Annotated[Optional[str], typer.Option(help="Cancel every job of this entity.")]
    = None,
    key: Annotated[Optional[str], typer.Option(help="With --entity: only this key.")] = None,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Cancel pending jobs by id, or every future check of an entity.

    Examples:  awty cancel 01JD3…   |   awty cancel --entity order --key 42
    """
    if bool(ids) == bool(entity):
        raise InvalidInput("give job ids or --entity, not both or neither")
    if key and not entity:
        raise InvalidInput("--key needs --entity")
    a = open_awty(home)
    res = a.cancel_entity(entity, key) if entity else a.cancel(ids or [])
    running = [res.jobs[i] for i in res.running]
    if as_json:
        r.emit_json({"cancelled": res.cancelled, "not_found": res.missing,
                     "running": [{"id": j.id, "runner": j.lease_owner} for j in running]})
    else:
        for job_id in res.cancelled:
            r.out(f"cancelled {job_id}")
        if entity and not res.cancelled and not res.running:
            r.out("no pending jobs for that entity")
    for j in running:
        r.err(f"awty: job {j.id} is being delivered now ({runner_label(j.lease_owner)}); "
              "its outcome will be in history")
    if res.missing:
        r.err(f"awty: not pending (unknown or already ended): {', '.join(res.missing)}")
    if res.missing or res.running:
        raise typer.Exit(1)


@commands.command()
@reports_errors
def reschedule(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="Job id.")],
    at: Annotated[Optional[str], typer.Option(help="New time.")] = None,
    in_: Annotated[Optional[str], typer.Option("--in", help="New delay from now.")] = None,
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Move a pending job to another time.  Example: awty reschedule 01JD3… --in 1d"""
    job = open_awty(home).reschedule(job_id, at=at, in_=in_)
    if as_json:
        r.emit_json(r.job_dict(job))
    else:
        from ..slots import slot_id

        r.out(f"rescheduled {job.id} to slot {slot_id(job.next_check_at)} "
              f"({r.when(job.next_check_at, utc)})")


@commands.command("list")
@reports_errors
def list_(
    status: Annotated[Optional[str], typer.Option(help="pending or in_flight.")] = None,
    slot: Annotated[Optional[str], typer.Option(help="Only this slot (YYYYMMDDHHMM).")] = None,
    entity: Annotated[Optional[str], typer.Option(help="Only this entity.")] = None,
    key: Annotated[Optional[str], typer.Option(help="Only this entity key.")] = None,
    kind: Annotated[Optional[str], typer.Option(help="http, exec or python.")] = None,
    limit: Annotated[Optional[int], typer.Option(
        help="At most this many (0: all). Default: 100 as text, all with --json.",
        show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every job, however many.")] = False,
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """List pending jobs in firing order. A cut list says on stderr how many it left out.

    Examples:  awty list --entity order   |   awty list --all   |   awty list --limit 10 --json
    """
    if status not in (None, "pending", "in_flight"):
        raise InvalidInput("--status must be pending or in_flight")
    if kind not in (None, "http", "exec", "python"):
        raise InvalidInput("--kind must be http, exec or python")
    if limit is not None and limit < 0:
        raise InvalidInput("--limit must be 0 (all) or more")
    cap = None if all_ or limit == 0 else limit if limit is not None else (
        None if as_json else LIST_LIMIT)
    a = open_awty(home)
    filters: dict[str, Any] = dict(status=status, slot=slot_arg(slot), entity=entity, key=key,
                                   kind=kind)
    # one more than shown tells whether anything was left out, without counting every time
    shown = Capped(lambda: a.list(**filters, limit=cap + 1 if cap else None), cap)
    if as_json:
        r.emit_json_rows(r.job_dict(j) for j in shown)
    else:
        r.jobs_table(lambda: shown, utc)
    if shown.cut:
        more = a.count(**filters) - (cap or 0)
        if more > 0:
            r.err(f"… {more:,} more (use --limit / --all)")


LIST_LIMIT = 100


@commands.command()
@reports_errors
def show(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="Job id.")],
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Show one job: pending, or how it ended, with each execution (local time unless
    --utc).  Example: awty show 01JD3…"""
    a = open_awty(home)
    view = a.get(job_id)
    events = a.executions(job_id)
    if as_json:
        r.emit_json(r.show_document(view, events))
        return
    r.show_job(view, events, utc)


@commands.command()
@reports_errors
def history(
    outcome: Annotated[Optional[str], typer.Option(help="done, gone, cancelled, failed or "
                                                   "expired.")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Same as --outcome failed.")] = False,
    entity: Annotated[Optional[str], typer.Option(help="Only this entity.")] = None,
    since: Annotated[Optional[str], typer.Option(help="A time, or a duration ago (e.g. 1d)."
                                                 )] = None,
    limit: Annotated[int, typer.Option(help="At most this many (0: all).")] = 100,
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Jobs that ended, newest first, with the first line of each error.

    Examples:  awty history --failed --since 1d   |   awty history --outcome expired --json
    """
    if failed:
        if outcome not in (None, "failed"):
            raise InvalidInput("--failed and --outcome exclude each other")
        outcome = "failed"
    if outcome not in (None, "done", "gone", "cancelled", "failed", "expired"):
        raise InvalidInput("--outcome must be done, gone, cancelled, failed or expired")
    if limit < 0:
        raise InvalidInput("--limit must be 0 (all) or more")
    a = open_awty(home)
    start = a.parse_time(since) if since else None
    # one more than shown tells whether the list was cut (history has no cheap count)
    shown = Capped(lambda: a.iter_history(outcome=outcome, entity=entity, since=start,
                                          limit=limit + 1 if limit else None), limit or None)
    if as_json:
        r.emit_json_rows(r.history_dict(h) for h in shown)
    else:
        r.history_table(lambda: shown, utc, failed=outcome == "failed")
    if shown.cut:
        r.err(f"… more than {limit:,} (use --limit N, or --limit 0 for all)")


class Capped:
    """The first ``cap`` rows ``read()`` gives (all for None), a row at a time, none held: a
    read of a million rows stays flat. Each iteration reads afresh (a text table reads twice:
    widths, then lines); ``cut`` says, after one, whether more rows followed."""

    def __init__(self, read: Callable[[], Iterable[Any]], cap: int | None):
        self.read, self.cap, self.cut = read, cap, False

    def __iter__(self) -> Iterator[Any]:
        self.cut = False
        for n, item in enumerate(self.read()):
            if n == self.cap:
                self.cut = True
                return
            yield item


@commands.command()
@reports_errors
def retry(
    ids: Annotated[list[str], typer.Argument(help="Ids of ended jobs (e.g. failed).")],
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Re-arm ended jobs (the dead letter) into the next slot with fresh attempts."""
    jobs = open_awty(home).retry(ids)
    if as_json:
        r.emit_json([r.job_dict(j) for j in jobs])
    else:
        from ..slots import slot_id

        for j in jobs:
            r.out(f"re-armed {j.id} into slot {slot_id(j.next_check_at)}")
