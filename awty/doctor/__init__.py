"""``awty doctor``: check a home and, with ``repair``, mend what can be mended (SPEC 7).

Checks, in order: home (exists, 0700), database file (0600), configuration, signing secret,
schema version, ``PRAGMA integrity_check``, stale leases, rows off the current resolution's
boundaries, slot tree <-> ``future_job`` agreement (missing envelopes, orphans, envelopes in the
wrong slot, leftover temp files, drop-ins awaiting import), work left in past slots, live
schedules without their pending occurrence, planted lock files, and whether cron (or a
systemd user timer) runs ``awty run-slot`` for this home.

Without ``repair`` nothing is written: the store is opened read-only (``Awty.read_only``),
without the chmod and migration that every other command does on first use. Memory stays
bounded however many jobs are pending: counts come from aggregates, and the tree is compared
with the store one slot at a time. Every repair is named in its finding (with a few example
ids) and logged to awty.log.

One module per group of checks (``files``, ``store``, ``tree``, ``locks``, ``cron``). The
checks that read the store are a table, ``STORE_CHECKS``: a store implementation with checks
of its own has its own table: PostgreSQL's (server, schema version, leases, drop-ins off)
is ``postgres.PG_STORE_CHECKS``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import config as config_mod
from ..api import Awty
from ..errors import AwtyError, InvalidInput
from .base import Ctx, Finding, Report
from .cron import check_cron, check_last_slot
from .files import check_config, check_home, check_home_and_db, check_mode, check_secret, db_files
from .locks import check_locks
from .store import (
    check_leases,
    check_past_slots,
    check_resolution,
    check_schedules,
    check_schema_and_integrity,
)
from .tree import check_incoming, check_rejected, check_retired, check_tree

if TYPE_CHECKING:
    from ..clock import Clock

__all__ = ["STORE_CHECKS", "Finding", "Report", "check_cron", "diagnose", "diagnose_home"]

Check = Callable[[Ctx], Finding | Iterable[Finding]]

# Checks that read the store, in order, once its schema and integrity are sound.
STORE_CHECKS: list[Check] = [check_leases, check_resolution, check_tree, check_retired,
                             check_incoming, check_past_slots, check_last_slot,
                             check_schedules]
# Checks of files awty keeps beside the store.
FILE_CHECKS: list[Check] = [check_locks, check_rejected]


# --- entry points --------------------------------------------------------------------------
def diagnose(a: Awty, *, repair: bool = False, env: dict[str, str] | None = None,
             which: Callable[[str], str | None] = shutil.which,
             run: Callable[..., subprocess.CompletedProcess[Any]] = subprocess.run,
             proc: Path | None = Path("/proc")) -> Report:
    """Check ``a``'s home; with ``repair``, mend what can be mended. Never raises for what it
    finds: every problem is a ``Finding``. ``which``, ``run`` and ``proc`` (the /proc root the
    cron daemon is looked for in) are how the scheduler checks reach the system."""
    ctx = Ctx(a, repair, a.clock.now(), dict(a.env if env is None else env), which, run,
               Report(repair=repair))
    if a.on_postgres:
        _diagnose_postgres(ctx)
    else:
        _diagnose_sqlite(ctx)
    ctx.add(check_cron(a.home, a.settings.resolution, env=ctx.env, which=which, run=run,
                       proc=proc))
    return ctx.report


def _diagnose_sqlite(ctx: Ctx) -> None:
    a = ctx.a
    ready = check_home_and_db(ctx)
    ctx.add(check_config(a.home, ctx.env))
    ctx.add(check_secret(ctx))
    try:
        if ready and check_schema_and_integrity(ctx) and not moved(ctx):
            run_checks(ctx, STORE_CHECKS)
        run_checks(ctx, FILE_CHECKS)
    finally:
        ctx.close()


def moved(ctx: Ctx) -> bool:
    """A home marked moved (``awty export --move``) is a leftover: say so, and where it went,
    instead of checking its jobs (catching up or re-adding them would run them twice)."""
    to = ctx.store.meta().get("moved")
    if not to:
        return False
    leftovers = "its jobs and envelope files" if ctx.a.tree.keeps_files else "its jobs"
    ctx.add(Finding("moved", True, f"this home moved to {to['to']} on {to['at']}: its runs "
                    f"and adds refuse; {leftovers} are already moved: delete them, and this "
                    "home's cron lines or timers", warning=True,
                    summary="this home has moved"))
    return True


def _diagnose_postgres(ctx: Ctx) -> None:
    from .postgres import PG_STORE_CHECKS, check_server_and_schema, skipped_file_checks

    a = ctx.a
    ctx.add(check_home(a.home, ctx.repair, None))
    ctx.add(check_config(a.home, ctx.env))
    ctx.add(check_secret(ctx))
    try:
        if check_server_and_schema(ctx) and not moved(ctx):
            run_checks(ctx, PG_STORE_CHECKS)
    finally:
        ctx.close()
    ctx.add(skipped_file_checks(ctx))


def run_checks(ctx: Ctx, checks: list[Check]) -> None:
    """Run checks in order; one that cannot go on (the store went away, a disk error) stops
    the rest of its table with a finding that says so."""
    try:
        for check in checks:
            ctx.add(check(ctx))
    except (AwtyError, OSError) as e:
        ctx.add(Finding("store", False, f"remaining checks stopped: {e}"))


def diagnose_home(home: str | Path | None = None, *, repair: bool = False,
                  env: dict[str, str] | None = None, clock: Clock | None = None,
                  which: Callable[[str], str | None] = shutil.which,
                  run: Callable[..., subprocess.CompletedProcess[Any]] = subprocess.run,
                  proc: Path | None = Path("/proc")) -> Report:
    """``diagnose`` for a home given by path, still reporting when its configuration is so
    broken that ``Awty`` cannot be built (then only the checks that need no settings run)."""
    env = dict(os.environ if env is None else env)
    try:
        a = Awty(home, clock=clock, env=env)
    except InvalidInput as e:
        return _without_settings(home, e, repair=repair, env=env, which=which, run=run,
                                 proc=proc)
    with a:
        return diagnose(a, repair=repair, env=env, which=which, run=run, proc=proc)


def _without_settings(home: str | Path | None, error: InvalidInput, *, repair: bool,
                      env: dict[str, str], which: Callable[[str], str | None],
                      run: Callable[..., subprocess.CompletedProcess[Any]],
                      proc: Path | None) -> Report:
    home = Path(home).expanduser() if home else config_mod.default_home(env)
    report = Report(repair=repair)
    report.findings.append(check_home(home, repair, None))
    db = home / "awty.db"
    if db.exists():
        report.findings.append(check_mode(db, 0o600, "database", repair, db_files(db)))
    report.findings.append(Finding("config", False, str(error)))
    report.findings.append(Finding("other checks", False, "skipped until the configuration "
                                   "is valid (the resolution decides what a slot is)"))
    report.findings.extend(check_cron(home, None, env=env, which=which, run=run, proc=proc))
    return report
