"""`awty export` holds no more in memory for 30,000 schedules than for one: the schedules are
streamed like the pending jobs and the history (a cursor on SQLite, a server-side cursor on
PostgreSQL), on each store (``backend``). Measured as the peak RSS (VmHWM) of a real ``awty
export`` process; read at once, 30,000 schedules of a 1 KB payload cost it ~100 MB more
(streamed: ~13 MB, the cursor's batches and allocator slack).
SQLite's page cache (32 MB, ``PRAGMA cache_size``) fills as any long read goes: it is allowed
for."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from relkit import cli_env, run_cli

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

N = 30_000
PAGE_CACHE_KB = 32 * 1024
NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
# The awty CLI, printing its own peak RSS as it exits: a child's ru_maxrss would start from
# its parent's (this test process) at the fork; VmHWM belongs to the process's own memory.
PEAK = """
import atexit, sys
def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write(f"peak_kb {line.split()[1]}\\n")
atexit.register(peak)
from awty.cli import main
sys.argv = ["awty", *sys.argv[1:]]
main()
"""
COPIES = ("INSERT INTO {s}schedule SELECT name || '-' || n, cron, every, start, zone, missed, "
          "missed_window, resolution, template, next_at, paused_at, created_at "
          "FROM {s}schedule, {series} WHERE name = 'tick'")


def _copies(home, backend, n: int) -> None:
    """``n`` more schedules like 'tick', written straight into the store (quick)."""
    if backend.kind == "sqlite":
        with sqlite3.connect(home / "awty.db") as c:
            c.execute(COPIES.format(s="", series=f"(WITH RECURSIVE k(n) AS (SELECT 1 UNION "
                                    f"ALL SELECT n + 1 FROM k WHERE n < {n}) SELECT n FROM k)"))
        return
    import psycopg

    with psycopg.connect(backend.kw["database_url"], autocommit=True) as c:
        c.execute(COPIES.format(s=f'"{backend.kw["database_schema"]}".',
                                series=f"generate_series(1, {n}) AS k(n)"))


def _export_peak_kb(home, backend, out) -> int:
    env = {**cli_env(home, NOW, resolution=1), **backend.env}
    res = subprocess.run([sys.executable, "-c", PEAK, "export", "--output", str(out)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return int(res.stderr.rsplit("peak_kb ", 1)[1].split()[0])


def test_export_memory_is_flat_in_the_number_of_schedules(home, backend, tmp_path):
    env = {**cli_env(home, NOW, resolution=1), **backend.env}
    res = run_cli(["schedule", "add", "tick", "https://example.com/tick", "--cron",
                   "*/5 * * * *", "--tz", "UTC", "--payload", json.dumps({"pad": "x" * 1000})],
                  env)
    assert res.returncode == 0, res.stderr
    one = _export_peak_kb(home, backend, tmp_path / "one.jsonl")
    _copies(home, backend, N)
    many = _export_peak_kb(home, backend, tmp_path / "many.jsonl")
    lines = (tmp_path / "many.jsonl").read_text().splitlines()
    assert sum('"schedule": {' in x[:14] for x in lines) == N + 1
    assert json.loads(lines[-1])["end"]["schedules"] == N + 1
    cache = PAGE_CACHE_KB if backend.kind == "sqlite" else 0
    assert many - one < cache + 25_000, \
        f"export peak RSS: 1 schedule {one} KB, {N + 1:,} {many} KB"
