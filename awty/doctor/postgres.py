"""Doctor on a PostgreSQL home: the server (reachable, its version), the schema (version), then
the store checks that hold for any store (``PG_STORE_CHECKS``). There is no database file and
no slot tree: drop-in envelopes are a single-host feature, off with PostgreSQL, and the checks
of files beside the store are skipped with a note saying so."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from ..errors import AwtyError
from .base import Ctx, Finding
from .cron import check_last_slot
from .store import check_leases, check_past_slots, check_resolution, check_schedules

Check = Callable[[Ctx], Finding | Iterable[Finding]]


def check_server_and_schema(ctx: Ctx) -> bool:
    """Reachable, which server, which schema version. True when the store checks may run.
    Read through a read-only view: doctor never creates or migrates a shared schema (that is
    `awty init`'s, run once from one host)."""
    view = ctx.a.read_only()
    try:
        health = view.store.check()
    except AwtyError as e:
        text = str(e)
        if "awty init" in text:  # the server answered; the schema is missing or behind
            ctx.add(Finding("server", True, f"PostgreSQL at {_where(ctx)} answers"))
            ctx.add(Finding("schema", False, text))
        else:
            ctx.add(Finding("server", False, text))
        return False
    finally:
        view.close()
    if not health.ok and "unreachable" in health.detail:
        ctx.add(Finding("server", False, f"{health.detail}: {'; '.join(health.problems)}"))
        return False
    ctx.add(Finding("server", True, health.detail))
    if health.problems:
        ctx.add(Finding("schema", False, "; ".join(health.problems)))
        return False
    ctx.add(Finding("schema", True, f"version {health.schema_version}"))
    return True


def check_dropins_off(ctx: Ctx) -> Finding:
    """Say that drop-ins are off, and warn when files wait in a slot tree nobody reads."""
    tree = ctx.a.home / "slots"
    waiting = sum(1 for p in tree.rglob("*.json*") if p.name.endswith((".json", ".batch.jsonl"))
                  and p.is_file()) if tree.is_dir() else 0
    moved = _moved_sqlite(ctx)
    if waiting and moved:
        return Finding("drop-ins", True, f"off with PostgreSQL; {tree} holds {waiting} "
                       f"envelope file(s) of {ctx.a.db_path}, which moved to {moved['to']} on "
                       f"{moved['at']}: already moved: delete them", warning=True,
                       summary="envelope files left by a moved home")
    if waiting:
        return Finding("drop-ins", True, f"off with PostgreSQL, yet {tree} holds {waiting} "
                       "envelope file(s) that no runner reads: add them with `awty add "
                       "--batch` (one JSON object per line), then delete them", warning=True,
                       summary="envelope files no runner reads")
    return Finding("drop-ins", True, "off: drop-in envelope files are a single-host feature; "
                   "with PostgreSQL every host adds with `awty add` or the Python API")


def _moved_sqlite(ctx: Ctx) -> dict[str, str] | None:
    """Where this home's own awty.db moved, when ``export --move`` marked it."""
    if not ctx.a.db_path.exists():
        return None
    from ..store.sqlite import left_behind

    return left_behind(ctx.a.db_path)[1]


def check_runner_kinds(ctx: Ctx) -> Finding:
    """Every kind of pending job has a live runner that may claim it (``runner_kinds``); a
    runner is live when it ran within the last two slots or the hourly catch-up."""
    window = max(timedelta(hours=1), timedelta(minutes=2 * ctx.a.settings.resolution)) \
        + timedelta(minutes=5)
    runners = ctx.store.runners()
    live = [r for r in runners if r[3] >= ctx.now - window]
    waiting = {k: n for k in ("http", "exec", "python") if (n := ctx.store.count(kind=k))}
    if not waiting:
        return Finding("runners", True, _seen(live, runners, window))
    if not runners:
        return Finding("runners", True, "no runner host has run yet: the pending jobs wait "
                       "for the first `awty run-slot`", warning=True,
                       summary="no runner has run yet")
    if not live:
        return Finding("runners", False, f"no runner has run in the last {_mins(window)}: "
                       f"{sum(waiting.values())} pending job(s) wait; "
                       f"{_seen(live, runners, window)}")
    claimed = {k for r in live for k in r[1]}
    stranded = {k: n for k, n in waiting.items() if k not in claimed}
    if not stranded:
        return Finding("runners", True, _seen(live, runners, window))
    what = ", ".join(f"{n} {k}" for k, n in stranded.items())
    return Finding("runners", False, f"{what} job(s) pending that no live runner may claim "
                   f"({_seen(live, runners, window)}): add "
                   f"{' and '.join(repr(k) for k in stranded)} to runner_kinds on a host that "
                   "can run them")


Runners = list[tuple[str, tuple[str, ...], int | None, datetime]]


def _seen(live: Runners, runners: Runners, window: timedelta) -> str:
    if not live:
        last = runners[0] if runners else None
        return f"last runner: {last[0]} at {last[3]:%Y-%m-%d %H:%M} UTC" if last else \
            "no runner host has run yet"
    return (f"live runners (seen in the last {_mins(window)}): "
            + "; ".join(f"{h} claims {', '.join(k)}" for h, k, _, _ in live))


def _mins(window: timedelta) -> str:
    return f"{int(window.total_seconds() // 60)} min"


def skipped_file_checks(ctx: Ctx) -> Finding:
    return Finding("files", True, "database file, slot tree and lock file checks skipped: "
                   "PostgreSQL keeps jobs and locks in the server")


def _where(ctx: Ctx) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(ctx.a.settings.database_url or "")
    except Exception:  # noqa: BLE001 - only for a message
        return "the configured URL"
    return f"{info.get('host') or 'local socket'}:{info.get('port') or 5432}"


# The store checks on PostgreSQL, in order, once the server and schema are sound.
PG_STORE_CHECKS: list[Check] = [check_leases, check_resolution, check_past_slots,
                                check_last_slot, check_runner_kinds, check_schedules,
                                check_dropins_off]
