"""The ``awty`` command line: parse, call one ``Awty`` method, render. Nothing else lives here.

Errors: the library raises ``AwtyError`` subclasses; ``reports_errors`` prints one line on
stderr and exits with the error's code (1 could not be done, 2 bad input). Usage errors from
the parser are shown as one line too (``_OneLineGroup``)."""

from __future__ import annotations

import functools
import json
from contextlib import nullcontext
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from . import __version__
from . import render as r
from .errors import AwtyError, InvalidInput


class _OneLineGroup(TyperGroup):
    """A usage error is one line on stderr and exit 2, like every other bad input."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except Exception as e:
            if hasattr(e, "format_message") and hasattr(e, "exit_code"):
                ctx = getattr(e, "ctx", None)
                where = f"awty {ctx.info_name}: " if ctx is not None and ctx.parent else "awty: "
                r.err(where + e.format_message().splitlines()[0]
                      + ("  (see --help)" if e.exit_code == 2 else ""))
                sys.exit(e.exit_code)
            if type(e).__name__ == "Abort":
                r.err("aborted")
                sys.exit(1)
            raise
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=_OneLineGroup, rich_markup_mode=None, no_args_is_help=True, add_completion=False,
    pretty_exceptions_show_locals=False, context_settings={"help_option_names": ["-h", "--help"]},
    help="awty — Are We There Yet? Schedule future checks and signed HTTP callbacks; "
         "a plain cron entry (`awty run-slot`) fires them.\n\n"
         "Quick tour:\n\n"
         "  awty add https://example.com/hook --in 2h --payload '{\"order\": 42}'\n\n"
         "  awty list\n\n  awty crontab --install\n\n  awty history",
)
secret_app = typer.Typer(cls=_OneLineGroup, rich_markup_mode=None, no_args_is_help=True,
                         help="Signing secrets for callbacks (Standard Webhooks).")
app.add_typer(secret_app, name="secret")

Home = Annotated[Optional[Path], typer.Option(
    "--home", help="awty's home directory (default: $AWTY_HOME, else ~/.local/share/awty).",
    show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
Utc = Annotated[bool, typer.Option("--utc", help="Show times in UTC instead of local time.")]


def reports_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AwtyError as e:
            r.err(f"awty: {e}")
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            r.err("awty: interrupted")
            raise typer.Exit(130) from None
    return wrapper


def _awty(home: Path | None, **kw: Any):
    from .api import Awty

    return Awty(home, **kw)


def _slot_arg(text: str | None):
    if text is None:
        return None
    from .slots import parse_slot_id

    try:
        return parse_slot_id(text)
    except ValueError as e:
        raise InvalidInput(str(e)) from None


# Input read for one job (--payload @file or -, one --batch line) stops here: far above any
# payload awty stores, and @/dev/zero or an endless pipe is refused instead of filling memory.
MAX_INPUT = 1 << 20


def _read_payload(payload: str | None) -> str | None:
    if payload is None:
        return None
    if payload == "-":
        data: str | bytes = sys.stdin.read(MAX_INPUT + 1)
    elif payload.startswith("@"):
        try:
            with open(payload[1:], "rb") as f:
                data = f.read(MAX_INPUT + 1)
        except OSError as e:
            raise InvalidInput(f"--payload {payload}: {e.strerror}") from None
    else:
        return payload
    if len(data) > MAX_INPUT:
        raise InvalidInput(f"--payload {payload}: more than {MAX_INPUT} bytes")
    try:
        return data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        raise InvalidInput(f"--payload {payload}: not UTF-8 text") from None


# --- commands ------------------------------------------------------------------------------
@app.command()
@reports_errors
def init(home: Home = None) -> None:
    """Create awty's home (0700), database (0600), slot tree and a commented awty.toml.

    Other commands create home on first use; init is for seeing where things live.
    """
    a = _awty(home)
    made = a.init()
    for path in made:
        r.out(f"created {path}")
    r.out(f"awty home is {a.home}" + ("" if made else " (already set up)"))
    r.out("next: `awty crontab --install` so that cron runs the slots")


@app.command()
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
    exec_: Annotated[bool, typer.Option("--exec", help="TARGET is a shell command (/bin/sh -c), "
                                        "run in this directory, payload on stdin.")] = False,
    call: Annotated[bool, typer.Option("--call", help="TARGET is package.module:function, "
                                       "called with the job.")] = False,
    payload: Annotated[Optional[str], typer.Option(help="JSON payload, @file, or - for "
                                                   "stdin.")] = None,
    entity: Annotated[Optional[str], typer.Option(help="What the job checks (e.g. order).")] = None,
    key: Annotated[Optional[str], typer.Option(help="Which one (e.g. 42).")] = None,
    idempotency_key: Annotated[Optional[str], typer.Option(
        help="Adding the same job twice with this key returns the first one.")] = None,
    header: Annotated[Optional[list[str]], typer.Option(
        help="Extra request header 'Name: value' (repeatable).")] = None,
    max_checks: Annotated[Optional[int], typer.Option(help="Re-checks allowed (default 5).")] = None,
    horizon: Annotated[Optional[str], typer.Option(help="Furthest re-check (default 7d).")] = None,
    timeout: Annotated[Optional[str], typer.Option(help="Per execution (default 30s).")] = None,
    max_attempts: Annotated[Optional[int], typer.Option(help="Attempts on failure (default 6)."
                                                        )] = None,
    misfire_grace: Annotated[Optional[str], typer.Option(
        help="With catchup --misfire skip: how late this job may still fire.")] = None,
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
    """
    if batch is not None:
        if target is not None:
            raise InvalidInput("give TARGET or --batch, not both")
        specs = _read_batch(batch)
        results = _awty(home).add_many(specs, dry_run=dry_run)
        r.added(results, utc, as_json)
        return
    if target is None:
        raise InvalidInput("missing TARGET (a URL, or a command with --exec; see --help)")
    if exec_ and call:
        raise InvalidInput("--exec and --call exclude each other")
    kind = "exec" if exec_ else "python" if call else "http"
    res = _awty(home).add(
        target, at=at, in_=in_, kind=kind, payload_json=_read_payload(payload), entity=entity,
        key=key, idempotency_key=idempotency_key, headers=header or None,
        max_checks=max_checks, horizon=horizon, timeout=timeout, max_attempts=max_attempts,
        misfire_grace=misfire_grace, dry_run=dry_run)
    r.added([res], utc, as_json)


def _read_batch(source: str) -> list[dict]:
    """JSON lines, split on "\\n" only (JSON text may hold U+2028 and friends raw), each line
    read up to MAX_INPUT."""
    specs = []
    try:
        f = sys.stdin if source == "-" else open(source, encoding="utf-8")
        try:
            n = 0
            while line := f.readline(MAX_INPUT + 1):
                n += 1
                if len(line) > MAX_INPUT:
                    raise InvalidInput(f"line {n}: longer than {MAX_INPUT} characters")
                if not line.strip():
                    continue
                try:
                    spec = json.loads(line)
                except ValueError as e:
                    raise InvalidInput(f"line {n}: not JSON ({e})") from None
                except RecursionError:
                    raise InvalidInput(f"line {n}: not JSON (nested too deeply)") from None
                if not isinstance(spec, dict):
                    raise InvalidInput(f"line {n}: not a JSON object")
                specs.append(spec)
        finally:
            if f is not sys.stdin:
                f.close()
    except OSError as e:
        raise InvalidInput(f"--batch {source}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"--batch {source}: not UTF-8 text") from None
    if not specs:
        raise InvalidInput(f"--batch {source}: no jobs in it")
    return specs


@app.command()
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
    a = _awty(home)
    jobs = a.cancel_entity(entity, key) if entity else a.cancel(ids or [])
    missing = [i for i in (ids or []) if i not in {j.id for j in jobs}]
    if as_json:
        r.emit_json({"cancelled": [j.id for j in jobs], "not_found": missing})
    else:
        for j in jobs:
            r.out(f"cancelled {j.id}")
        if entity and not jobs:
            r.out("no pending jobs for that entity")
    if missing:
        r.err(f"awty: not pending (unknown or already ended): {', '.join(missing)}")
        raise typer.Exit(1)


@app.command()
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
    job = _awty(home).reschedule(job_id, at=at, in_=in_)
    if as_json:
        r.emit_json(r.job_dict(job))
    else:
        from .slots import slot_id

        r.out(f"rescheduled {job.id} to slot {slot_id(job.next_check_at)} "
              f"({r.when(job.next_check_at, utc)})")


@app.command("list")
@reports_errors
def list_(
    status: Annotated[Optional[str], typer.Option(help="pending or in_flight.")] = None,
    slot: Annotated[Optional[str], typer.Option(help="Only this slot (YYYYMMDDHHMM).")] = None,
    entity: Annotated[Optional[str], typer.Option(help="Only this entity.")] = None,
    key: Annotated[Optional[str], typer.Option(help="Only this entity key.")] = None,
    kind: Annotated[Optional[str], typer.Option(help="http, exec or python.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (0: all).")] = 100,
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """List pending jobs in firing order.  Example: awty list --entity order --json"""
    if status not in (None, "pending", "in_flight"):
        raise InvalidInput("--status must be pending or in_flight")
    if kind not in (None, "http", "exec", "python"):
        raise InvalidInput("--kind must be http, exec or python")
    jobs = _awty(home).list(status=status, slot=_slot_arg(slot), entity=entity, key=key,
                            kind=kind, limit=limit or None)
    if as_json:
        r.emit_json([r.job_dict(j) for j in jobs])
    else:
        r.jobs_table(jobs, utc)


@app.command()
@reports_errors
def show(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="Job id.")],
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Show one job: pending, or how it ended, with each execution."""
    a = _awty(home)
    found = a.get(job_id)
    events = a.events(job_id)
    if isinstance(found, list):
        doc = {"state": "ended", **r.history_dict(found[-1]),
               "ended_runs": [r.history_dict(h) for h in found], "executions": events}
    else:
        doc = {"state": found.status.value, **r.job_dict(found), "executions": events}
    if as_json:
        r.emit_json(doc)
        return
    skip = {"executions", "ended_runs", "payload", "headers"}
    r.kv([(k, v) for k, v in doc.items() if k not in skip and v is not None])
    r.out(f"payload     {json.dumps(doc.get('payload') if 'payload' in doc else None)}")
    if doc.get("headers"):
        r.out(f"headers     {json.dumps(doc['headers'])}")
    if events:
        r.table("executions", ["at", "slot", "check", "attempt", "answer", "status", "ms",
                               "error"],
                ([e["at"], e["slot"], e["check_no"], e["attempt"], e["answer"], e["status"],
                  e["duration_ms"], e["error"]] for e in events))


@app.command()
@reports_errors
def slots(as_json: Json = False, utc: Utc = False, home: Home = None) -> None:
    """Slots holding jobs, with counts (like atq). Past slots still holding work need
    `awty catchup`."""
    a = _awty(home)
    now_slot = a.current_slot()
    rows = a.slots()
    from .slots import iso, slot_id

    if as_json:
        r.emit_json([{"slot": slot_id(s), "at": iso(s), "jobs": n, "past": s <= now_slot}
                     for s, n in rows])
        return
    r.table(None, ["slot", "fires", "jobs", ""],
            ([slot_id(s), r.when(s, utc), n, "past: run `awty catchup`" if s < now_slot else ""]
             for s, n in rows))


@app.command("run-slot")
@reports_errors
def run_slot(
    slot: Annotated[Optional[str], typer.Argument(
        help="Slot id YYYYMMDDHHMM (UTC); default: the boundary that just passed.",
        show_default=False)] = None,
    shard: Annotated[Optional[str], typer.Option(help="i/n: run only shard i of n "
                                                 "(1-based), by hash of job id.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would fire.")] = False,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Fire a slot's jobs (what cron runs at every boundary). Quiet under cron unless
    something needs a human; a progress bar on a terminal.

    Examples:  awty run-slot   |   awty run-slot 202611221415 --shard 1/2
    """
    progress = _progress(as_json)
    a = _awty(home, on_event=progress)
    with progress or nullcontext():
        s = a.run_slot(_slot_arg(slot), shard=_shard(shard), dry_run=dry_run)
    _report_slot(s.to_dict(), as_json)


def _report_slot(d: dict, as_json: bool) -> None:
    if as_json:
        r.emit_json(d)
    elif d.get("busy"):
        r.err(f"awty: slot {d['slot']} is already being run ({d['busy']}); nothing to do")
    elif d.get("dry_run"):
        r.out(f"slot {d['slot']}: {d['ran']} job(s) would run "
              + json.dumps(d["outcomes"]) + (f", {d['imported']} file(s) to import"
                                             if d["imported"] else ""))
    elif sys.stdout.isatty():
        r.out(r.summary_line(d))
    elif d["outcomes"].get("failed") or d.get("rejected"):
        r.err("awty: " + r.summary_line(d) + " (see `awty history --outcome failed`)")


@app.command()
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
    from .slots import parse_duration

    grace = None
    if misfire_grace is not None:
        try:
            grace = parse_duration(misfire_grace)
        except ValueError as e:
            raise InvalidInput(f"--misfire-grace: {e}") from None
    progress = _progress(as_json)
    a = _awty(home, on_event=progress)
    with progress or nullcontext():
        c = a.catchup(until=_slot_arg(until), dry_run=dry_run, misfire=misfire,
                      misfire_grace=grace)
    d = c.to_dict()
    if as_json:
        r.emit_json(d)
        return
    if dry_run:
        for s in d["slots"]:
            r.out(f"slot {s['slot']}: {s['ran']} job(s) would run {json.dumps(s['outcomes'])}")
        r.out(f"{len(d['slots'])} slot(s), {d['ran']} job(s)")
        return
    failed = d["outcomes"].get("failed", 0)
    if sys.stdout.isatty() or failed:
        line = (f"catchup: {len(d['slots'])} slot(s), ran {d['ran']} in {d['seconds']:.2f}s: "
                + (", ".join(f"{v} {k}" for k, v in sorted(d["outcomes"].items())) or "nothing"))
        (r.out if sys.stdout.isatty() else r.err)(line)


@app.command()
@reports_errors
def history(
    outcome: Annotated[Optional[str], typer.Option(help="done, gone, cancelled, failed or "
                                                   "expired.")] = None,
    entity: Annotated[Optional[str], typer.Option(help="Only this entity.")] = None,
    since: Annotated[Optional[str], typer.Option(help="A time, or a duration ago (e.g. 1d)."
                                                 )] = None,
    limit: Annotated[int, typer.Option(help="At most this many (0: all).")] = 100,
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Jobs that ended, newest first.  Example: awty history --outcome failed --since 1d"""
    if outcome not in (None, "done", "gone", "cancelled", "failed", "expired"):
        raise InvalidInput("--outcome must be done, gone, cancelled, failed or expired")
    a = _awty(home)
    rows = a.history(outcome=outcome, entity=entity,
                     since=a.parse_time(since) if since else None, limit=limit or None)
    if as_json:
        r.emit_json([r.history_dict(h) for h in rows])
    else:
        r.history_table(rows, utc)


@app.command()
@reports_errors
def retry(
    ids: Annotated[list[str], typer.Argument(help="Ids of ended jobs (e.g. failed).")],
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Re-arm ended jobs (the dead letter) into the next slot with fresh attempts."""
    jobs = _awty(home).retry(ids)
    if as_json:
        r.emit_json([r.job_dict(j) for j in jobs])
    else:
        from .slots import slot_id

        for j in jobs:
            r.out(f"re-armed {j.id} into slot {slot_id(j.next_check_at)}")


@app.command()
def version() -> None:
    """Print awty's version."""
    r.out(f"awty {__version__}")


@secret_app.command("new")
def secret_new() -> None:
    """Print a fresh signing secret (whsec_…). Store it 0600 and point signing_secret_file at
    it, or export AWTY_SIGNING_SECRET; give the same secret to the receiver."""
    from .signing import new_secret

    r.out(new_secret())


@app.command()
@reports_errors
def verify(
    request: Annotated[Path, typer.Argument(help="A saved request: header lines, a blank "
                                            "line, then the body (as `curl -i` or a raw "
                                            "HTTP dump shows it); - for stdin.")],
    secret_file: Annotated[Optional[Path], typer.Option(help="File with the whsec_ secret "
                                                        "(default: $AWTY_SIGNING_SECRET).")]
    = None,
    tolerance: Annotated[str, typer.Option(help="Accepted age of webhook-timestamp.")] = "5m",
) -> None:
    """Check a received callback's Standard Webhooks signature, as a receiver would."""
    from .signing import parse_secret
    from .signing import verify as verify_sig
    from .slots import parse_duration

    text = os.environ.get("AWTY_SIGNING_SECRET")
    if secret_file is not None:
        try:
            text = secret_file.read_text().strip()
        except OSError as e:
            raise InvalidInput(f"--secret-file: {e.strerror}") from None
    if not text:
        raise InvalidInput("no secret: give --secret-file or set AWTY_SIGNING_SECRET")
    raw = sys.stdin.buffer.read() if str(request) == "-" else _read_bytes(request)
    headers, body = _split_request(raw)
    from .clock import default_clock

    verify_sig(parse_secret(text), headers, body, default_clock().now(),
               parse_duration(tolerance))
    r.out(f"signature ok (webhook-id {headers.get('webhook-id')})")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise InvalidInput(f"{path}: {e.strerror}") from None


def _split_request(raw: bytes) -> tuple[dict[str, str], bytes]:
    sep = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
    head, _, body = raw.partition(sep)
    headers = {}
    for line in head.decode("latin-1").splitlines():
        if ":" in line and not line.upper().startswith(("POST ", "HTTP/")):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if not headers:
        raise InvalidInput("no headers found: save the request as header lines, a blank line, "
                           "then the body")
    return headers, body


# --- helpers -------------------------------------------------------------------------------
def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InvalidInput(f"--shard {text!r}: use i/n, e.g. 1/4") from None
    if not (1 <= i <= n):
        raise InvalidInput(f"--shard {text!r}: need 1 <= i <= n")
    return (i - 1, n)


def _progress(as_json: bool):
    if as_json or not sys.stdout.isatty():
        return None
    return r.Progress()


from . import cli_ops  # noqa: E402,F401  registers doctor, crontab, stats, prune


def main() -> None:
    _app_for(sys.argv[1:])()


def _app_for(args: list[str]) -> typer.Typer:
    """The app to run: when the first word names a plain command, a one-command app. Typer
    builds every command's parameters before dispatching (~12 ms for all of them); `awty add`
    under a crontab or a script loop should pay only for its own."""
    name = args[0] if args else ""
    if name.startswith("-"):
        return app
    found = [c for c in app.registered_commands
             if (c.name or c.callback.__name__.replace("_", "-")) == name]  # type: ignore
    if len(found) != 1:
        return app  # help, a typo (suggestions), or a sub-app such as `secret`
    one = typer.Typer(cls=_OneLineGroup, rich_markup_mode=None, add_completion=False,
                      pretty_exceptions_show_locals=False,
                      context_settings={"help_option_names": ["-h", "--help"]})
    one.registered_commands = found
    one.callback()(_no_options)  # keep it a group, so `awty NAME …` parses as with the full app
    return one


def _no_options() -> None:
    pass


if __name__ == "__main__":
    main()
