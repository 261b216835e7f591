"""Commands that look after a home: ``init``, ``doctor``, ``crontab``, ``stats``, ``prune``,
``export``, ``import``, ``version``. Like every command module: parse, call, render; the
modules doing the work are imported inside the commands so that ``awty add`` never pays for
them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from .._version import __version__
from ..errors import InvalidInput
from . import render as r
from .options import (
    Home, Json, Utc, command_env, new_app, open_awty, positive_duration, reports_errors,
)

if TYPE_CHECKING:
    from ..api import Awty
    from ..doctor.base import Finding, Report

commands = new_app()


@commands.command()
@reports_errors
def init(home: Home = None) -> None:
    """Create awty's home (0700), database (0600), slot tree, a commented awty.toml and,
    unless one is configured, a signing secret (signing.secret, 0600) that callbacks are
    signed with: give it to your receiver.

    Other commands create home on first use; init is for seeing where things live. With a
    PostgreSQL database URL, init creates (or migrates) the schema: run it once, from any host.
    """
    a = open_awty(home)
    made = a.init()
    for path in made:
        r.out(f"created {path}")
    r.out(f"awty home is {a.home}" + ("" if made else " (already set up)"))
    if a.on_postgres:
        r.out(f"jobs are in {a.where} (database_url in {a.sources.get('database_url')})")
    if a.settings.signing_secret_file:
        r.out(f"callbacks are signed with the secret in {a.settings.signing_secret_file} "
              "(your receiver verifies with it)")
    r.out("next: `awty crontab --install` so that cron runs the slots")


@commands.command()
def version() -> None:
    """Print awty's version."""
    r.out(f"awty {__version__}")


# --- config --------------------------------------------------------------------------------
@commands.command(name="config")
@reports_errors
def config_(
    changes: Annotated[Optional[list[str]], typer.Argument(
        help="KEY=VALUE: a cluster setting to change (with --cluster).",
        show_default=False)] = None,
    cluster: Annotated[bool, typer.Option("--cluster", help="The settings every host of a "
                                          "PostgreSQL home reads from the database (resolution, "
                                          "backoff, max_checks, horizon, max_attempts, "
                                          "max_delay); KEY=VALUE changes them.")] = False,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Show this home's settings and where each comes from (awty.toml, AWTY_*, a flag, the
    cluster); --cluster shows the ones a PostgreSQL home's hosts share, and changes them.

    A new resolution moves every pending job to its new slot in one transaction; then run
    `crontab --install` (or `systemd --install`) again on every runner host.

    Examples:

      awty config

      awty config --cluster --json

    To change one, on a PostgreSQL home: --cluster resolution=5 backoff=10s,1m,10m
    """
    from .. import config as cfg

    a = open_awty(home)
    if changes and not cluster:
        raise InvalidInput(f"to change a setting of this host, edit {a.home / 'awty.toml'} "
                           "(or set AWTY_<KEY>); --cluster KEY=VALUE changes the cluster's")
    if changes:
        _change_cluster(a, changes, as_json)
        return
    a.load_cluster()
    shared = a.cluster()
    if cluster and not a.on_postgres:
        r.err(f"awty: this home is on SQLite, a cluster of one: its settings are "
              f"{a.home / 'awty.toml'}'s (`awty config`)")
    keys = cfg.CLUSTER_KEYS if cluster else cfg.KEYS
    rows = {k: {"value": _plain(getattr(a.settings, k), k),
                "from": "cluster" if k in shared else a.sources.get(k, "default")}
            for k in keys}
    if cluster:
        for k in keys:
            if k in a.sources and k in shared:
                rows[k]["this_host"] = {"value": _plain(_local(a, k), k),
                                        "from": a.sources[k]}
    if as_json:
        r.emit_json(rows)
        return
    head = ["setting", "cluster" if cluster else "value", "this host" if cluster else "from"]
    r.table(None, head, ([k, cfg.shown(k, getattr(a.settings, k)),
                          _this_host(a, k) if cluster else rows[k]["from"]] for k in keys))


def _local(a: Awty, key: str) -> Any:
    from .. import config as cfg

    return getattr(cfg.load(a.home, a.env, {}), key)


def _this_host(a: Awty, key: str) -> str:
    from .. import config as cfg

    if key not in a.sources:
        return ""
    return f"{cfg.shown(key, _local(a, key))} ({a.sources[key]})"


def _plain(value: Any, key: str = "") -> Any:
    from ..config import redact

    if key == "database_url" and value:
        return redact(value)
    return list(value) if isinstance(value, tuple) else \
        value.value if hasattr(value, "value") else value


def _change_cluster(a: Awty, changes: list[str], as_json: bool) -> None:
    from .. import config as cfg

    pairs = {}
    for c in changes:
        key, eq, value = c.partition("=")
        if not eq or not key.strip():
            raise InvalidInput(f"{c!r}: write KEY=VALUE (e.g. resolution=5)")
        pairs[key.strip()] = value.strip()
    a.load_cluster()
    before = {k: getattr(a.settings, k) for k in pairs if k in cfg.CLUSTER_KEYS}
    moved = a.set_cluster(pairs)
    after = {k: getattr(a.settings, k) for k in before}
    if as_json:
        r.emit_json({"changed": {k: _plain(v) for k, v in after.items()}, "moved": moved})
        return
    r.out("cluster settings: " + ", ".join(
        f"{k} {cfg.shown(k, before[k])} -> {cfg.shown(k, after[k])}" for k in before))
    if before.get("resolution", a.settings.resolution) != a.settings.resolution:
        r.out(f"moved {moved} pending job(s) to {a.settings.resolution}-minute slots")
        r.out("next: `awty crontab --install` (or `awty systemd --install`) again on every "
              "runner host: their lines follow the resolution")


# --- doctor --------------------------------------------------------------------------------
@commands.command()
@reports_errors
def doctor(
    repair: Annotated[bool, typer.Option("--repair", help="Mend what can be mended: "
                                         "permissions, missing or stray envelopes, temp files, "
                                         "stale leases, jobs off the resolution's "
                                         "boundaries.")] = False,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Check this home: permissions, config, schema, database integrity, slot tree against
    the database, stale leases, missed slots, and whether cron runs `awty run-slot`.

    Read-only unless --repair; every repair is listed (and logged to awty.log). Exit 0 when
    everything is fine or was repaired, 1 when problems remain.

    Examples:

      awty doctor

      awty doctor --repair

      awty doctor --json | jq '.findings[] | select(.ok | not)'
    """
    from ..doctor import diagnose_home

    report = diagnose_home(home, repair=repair, env=command_env())
    if as_json:
        r.emit_json(report.to_dict())
    else:
        r.table(None, ["check", "status", "detail"],
                ([f.check, f.status, f.detail] for f in report.findings))
        _doctor_summary(report)
    if not report.ok:
        raise typer.Exit(1)


# Findings that --repair does not touch: they need the operator (cron, a new awty, catch-up).
_NOT_REPAIRABLE = {"cron", "schema", "integrity", "catch-up", "config", "secret", "drop-ins",
                   "server", "scheduler", "cron daemon", "last slot"}


def _doctor_summary(report: Report) -> None:
    """The closing line counts the rows above: each problem by its check, each warning in a
    few words ("1 warning: nothing runs the slots"); "all good" only when there is neither."""
    problems, repairs, warnings = report.problems, report.repairs, report.warnings
    if repairs:
        r.out(f"repaired: {', '.join(f.check for f in repairs)}")
    parts = []
    if problems:
        parts.append(f"{_count(problems, 'problem')} left: "
                     f"{', '.join(f.check for f in problems)}"
                     + ("" if report.repair or all(f.check in _NOT_REPAIRABLE for f in problems)
                        else " (`awty doctor --repair` mends what it can; the details say the "
                        "rest)"))
    if warnings:
        parts.append(f"{_count(warnings, 'warning')}: "
                     f"{', '.join(f.summary or f.check for f in warnings)}")
    r.out("; ".join(parts) if parts else "all good" if not repairs else "all good after repairs")


def _count(items: list[Finding], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


# --- crontab -------------------------------------------------------------------------------
@commands.command()
@reports_errors
def crontab(
    install: Annotated[bool, typer.Option("--install", help="Write the lines into your "
                                          "crontab, replacing this home's earlier ones; other "
                                          "lines are left alone.")] = False,
    resolution: Annotated[int | None, typer.Option(help="Slot minutes (default: this "
                                                      "home's setting).")] = None,
    awty_bin: Annotated[str | None, typer.Option(help="The awty command cron should run "
                                                    "(default: this awty, the script beside "
                                                    "the running Python, else that Python "
                                                    "with -m awty).")] = None,
    home: Home = None,
) -> None:
    """Print the cron lines that run this home: run-slot at every slot boundary, catchup at
    boot and hourly. Their output goes to <home>/cron.log; their errors to cron, which mails
    them (MAILTO). Without cron: `awty systemd`.

    Examples:

      awty crontab                  # print them

      awty crontab --install        # install (again: idempotent)

      awty crontab --home /srv/awty --awty-bin /opt/awty/bin/awty --install
    """
    from .. import crontab as cron
    from ..slots import check_resolution

    a = open_awty(home)
    res = a.settings.resolution if resolution is None else resolution
    try:
        check_resolution(res)
    except ValueError as e:
        raise InvalidInput(f"--resolution: {e}") from None
    store = refuse_unkept_database_url(a, "cron")
    a.load_cluster()  # the cluster's resolution, on PostgreSQL
    # built before any note: a path or command cron cannot take is then the only line
    lines = cron.entries(a.home, res, awty_bin, store=store)
    if res != a.settings.resolution:
        r.err(f"awty: note: this home's resolution is {a.settings.resolution}; set "
              f"resolution = {res} in {a.home / 'awty.toml'} too, then `awty doctor --repair`")
    _warn_env_unseen_by_cron(a.home)
    if not install:
        for line in lines:
            r.out(line)
        return
    from ..api import ensure_home

    ensure_home(a.home)  # cron appends to <home>/cron.log
    _, changed = cron.install(a.home, res, awty_bin, store=store)
    r.out(("installed" if changed else "already installed (crontab unchanged):")
          + f" run-slot every {res} min, catchup @reboot and hourly, for {a.home}")
    r.out(f"check with `crontab -l`; output goes to {a.home / 'cron.log'}, errors to cron's "
          "mail (set MAILTO, or notify_command in awty.toml)")


def refuse_unkept_database_url(a: Awty, scheduler: str) -> str | None:
    """The store the scheduler's runs will use, named for a comment beside its lines (None
    on SQLite); refused when its URL or schema comes from a flag or the environment only:
    those runs would not see it, and would fire a SQLite home of their own."""
    source = a.unkept_database_url()
    if source is not None:
        raise InvalidInput(f"the database URL comes from {source}, which {scheduler}'s runs "
                           f"will not see (they would open {a.db_path} instead): write it "
                           f"into {a.home / 'awty.toml'} (`awty init --database-url URL` "
                           "does), then run this again")
    url = a.settings.database_url
    if url is None:  # on SQLite
        return None
    from ..config import redact

    return (f"{redact(url)}, schema "
            f"\"{a.settings.database_schema}\" (database_url in {a.home / 'awty.toml'})")


def _warn_env_unseen_by_cron(home: Path) -> None:
    unseen = sorted(k for k in os.environ if k.startswith("AWTY_")
                    and k not in ("AWTY_HOME", "AWTY_NOW") and os.environ[k])
    if unseen:
        r.err(f"awty: note: cron will not see {', '.join(unseen)}: put settings in "
              f"{home / 'awty.toml'} (the secret in a 0600 signing_secret_file)")


# --- stats ---------------------------------------------------------------------------------
@commands.command()
@reports_errors
def stats(
    window: Annotated[str, typer.Option(help="How far back outcomes and executions count.")]
    = "1d",
    as_json: Json = False,
    utc: Utc = False,
    home: Home = None,
) -> None:
    """Pending work by slot and kind, outcomes, retries, failures and lateness over a window.

    Examples:  awty stats   |   awty stats --window 7d --json
    """
    from ..stats import compute

    doc = compute(open_awty(home), window=positive_duration(window, "--window"))
    if as_json:
        r.emit_json(doc)
        return
    _print_stats(doc, window, utc)


def _print_stats(doc: dict[str, Any], window: str, utc: bool) -> None:
    from ..slots import from_iso

    p, ex, late = doc["pending"], doc["executions"], doc["lateness_ms"]
    pairs = [
        ("pending", f"{p['total']} ({_kv(p['by_kind']) or 'none'}); in flight {p['in_flight']}"
                    + (f", {p['stale_leases']} with a stale lease" if p["stale_leases"] else "")),
        ("missed", f"{p['past_slots']['jobs']} job(s) in {p['past_slots']['slots']} past "
                   "slot(s)" + (": run `awty catchup`" if p["past_slots"]["jobs"] else "")),
        (f"last {window}", f"since {r.when(from_iso(doc['window']['since']), utc)}"),
        ("outcomes", _kv(doc["outcomes"]) or "none"),
        ("executions", f"{ex['total']} ({_kv(ex['by_answer']) or 'none'}); retries "
                       f"{ex['retries']}, failures {ex['failures']}"),
        ("lateness", "no executions" if not late["count"] else
         f"median {_ms(late['median'])}, p99 {_ms(late['p99'])}, max {_ms(late['max'])} "
         f"over {late['count']}"),
    ]
    if doc["schedules"]["total"]:
        pairs.append(("schedules", "{total} ({paused} paused); {skipped} skipped row(s) in the "
                      "window".format(**doc["schedules"])))
    r.kv(pairs)
    if p["next_slots"]:
        r.table("next slots", ["slot", "fires", "jobs"],
                ([s["slot"], r.when(from_iso(s["at"]), utc), s["jobs"]]
                 for s in p["next_slots"]))


def _kv(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts.items())


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f}s" if abs(value) >= 1000 else f"{value:.0f}ms"


# --- prune ---------------------------------------------------------------------------------
@commands.command()
@reports_errors
def prune(
    older_than: Annotated[str, typer.Option("--older-than", help="Delete history that ended "
                                            "more than this long ago (e.g. 30d).",
                                            show_default=False)],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count only; delete "
                                          "nothing.")] = False,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Delete old history rows and execution events. Pruned jobs are forgotten: `awty retry`
    and idempotency keys no longer find them. Pending jobs are never touched.

    Examples:  awty prune --older-than 30d   |   awty prune --older-than 1w --dry-run
    """
    from ..slots import iso
    from ..stats import prune as prune_history

    a = open_awty(home)
    age = positive_duration(older_than, "--older-than")
    n = prune_history(a, age, dry_run=dry_run)
    before = iso(a.clock.now() - age)
    if as_json:
        r.emit_json({"pruned": n, "before": before, "dry_run": dry_run})
    else:
        r.out(f"{'would prune' if dry_run else 'pruned'} {n} history row(s) that ended "
              f"before {before}")



# --- export / import -------------------------------------------------------------------------
@commands.command()
@reports_errors
def export(
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write here instead of stdout.", show_default=False)] = None,
    move: Annotated[Optional[str], typer.Option(
        "--move", metavar="WHERE", help="Mark this home as moved to WHERE (the database URL or "
        "home it goes to) before exporting: its runners and adds then refuse, saying where "
        "it went.", show_default=False)] = None,
    home: Home = None,
) -> None:
    """Write this home's pending jobs and history as JSON lines (to move it to another store:
    SQLite <-> PostgreSQL, with `awty import`). Stop the runners first: a job in flight is
    written as pending. The counts go to stderr. With --move, the home is fenced first: no
    add or run here can come after the export.

    Example:  awty export --output home.jsonl

    Moving:   awty export --move postgresql://awty@db.internal/awty --output home.jsonl
    """
    import sys

    a = open_awty(home)
    if output is None:
        moved = a.export(sys.stdout, move_to=move)
    else:
        try:
            f = open(output, "x", encoding="utf-8")
        except OSError as e:
            raise InvalidInput(f"--output {output}: {e.strerror or e} (nothing written over)"
                               ) from None
        with f:
            moved = a.export(f, move_to=move)
    r.err(f"exported {_moved_counts(moved)} from {a.where}")
    if move is not None:
        marked = a.moved()
        assert marked is not None  # export(move_to=...) marked it
        r.err(f"{a.where} is marked as moved to {marked['to']}: its runs and adds refuse "
              "from now on")


@commands.command(name="import")
@reports_errors
def import_(
    source: Annotated[str, typer.Argument(help="An `awty export` file, or - for stdin.",
                                          show_default=False)],
    allow_exec: Annotated[bool, typer.Option(
        "--allow-exec", help="Also import exec and python jobs (commands and functions this "
        "host's runners will run); refused without it.")] = False,
    as_json: Json = False,
    home: Home = None,
) -> None:
    """Load an `awty export` into this home's store, which must be empty (run `awty init`
    first on a PostgreSQL URL). Every job is checked as `add` checks it (id, target and
    callback rules, payload size…); a refused line is named and nothing is imported. The
    counts are checked against the export's; all jobs and history, or nothing.

    Example:  awty import home.jsonl --allow-exec --home /srv/awty

    (--allow-exec because that file holds exec and python jobs; an export of callbacks only
    needs no flag.)
    """
    import sys

    a = open_awty(home)
    try:
        f = sys.stdin if source == "-" else open(source, encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read {source}: {e.strerror or e}") from None
    with f:
        moved = a.import_export(f, allow_exec=allow_exec)
    if as_json:
        r.emit_json({**moved.to_dict(), "into": a.where})
    else:
        r.out(f"imported {_moved_counts(moved)} into {a.where}")


def _moved_counts(moved: Any) -> str:
    schedules = f", {moved.schedules} schedule(s)" if moved.schedules else ""
    return f"{moved.jobs} pending job(s){schedules} and {moved.history} history row(s)"
