"""Issue 28, item 8: reads stream. Every read command's memory stays flat in the number of rows
(``list --json`` of a million pending jobs held 6.4 GB as one document), JSON output is written
a row at a time in the format it always had, and text tables are still cut at ``--limit``.

A real ``awty`` process per read over a home holding N pending jobs and N history rows, on
SQLite and PostgreSQL; its peak RSS (``ru_maxrss`` from ``wait4``) may exceed that of a read of
one row by at most ``GROWTH_MB``. Before the fix, at N = 60,000 on SQLite: ``list --json``
+340 MB, ``history --json --limit 0`` +290 MB, ``list --all`` +80 MB, ``history --limit 0``
+90 MB.

N = 60,000 (about a minute per store); ``AWTY_FULL=1``: 1,000,000 (the issue's size).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.ids import new_id
from awty.model import Job, Kind
from helpers import T0
from relkit import cli_env, run_cli, scale

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

N = scale(60_000, 1_000_000)
GROWTH_MB = 50


def fill(home: Path, kw: dict, n: int) -> None:
    """``n`` pending jobs over 500 slots and ``n`` history rows, straight into the store (one
    ``import_home``: what ``awty import`` writes), in a few seconds rather than the minutes
    ``add`` would take with its envelope files; reads need only the rows."""
    base = T0 - timedelta(days=2)
    jobs = [Job(id=new_id(base + timedelta(microseconds=k)), kind=Kind.HTTP,
                target="https://example.com/hooks/order", payload_json=f'{{"order": {k}}}',
                headers={}, entity_name="order", entity_key=str(k),
                first_check_at=T0 + timedelta(minutes=15 * (k % 500)),
                next_check_at=T0 + timedelta(minutes=15 * (k % 500)), created_at=base,
                updated_at=base) for k in range(n)]

    def history():
        for k in range(n):
            at = base + timedelta(seconds=k % 86400)
            yield {"id": new_id(base - timedelta(days=1, microseconds=-k)), "kind": "http",
                   "target": "https://example.com/hooks/order", "entity_name": "order",
                   "entity_key": str(k), "outcome": "failed" if k % 7 == 0 else "done",
                   "reason": "5xx" if k % 7 == 0 else "2xx", "checks": 1, "attempts": 1,
                   "first_check_at": at, "ended_at": at, "created_at": at, "duration_ms": 3.0,
                   "lateness_ms": 10.0, "last_status": 200, "error": None, "output": "ok",
                   "idempotency_key": None, "fingerprint": None,
                   "payload": f'{{"order": {k}}}', "job": None, "host": "h", "pid": 1,
                   "schedule": None}
    with Awty(home, clock=FixedClock(T0), env={}, **kw) as a:
        a.store.import_home(jobs, [None] * n, history())


# The child's peak RSS, taken by a small Python that starts it: a child forked from pytest
# itself would count pytest's memory too (the high-water mark survives exec).
MEASURE = """if True:
    import os, subprocess, sys
    p = subprocess.Popen(sys.argv[2:])
    _, status, usage = os.wait4(p.pid, 0)
    with open(sys.argv[1], "w") as f:
        f.write(f"{usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def read(args: list[str], env: dict[str, str], out: Path, timeout: float = 600
         ) -> tuple[float, float, str]:
    """Run ``awty ARGS`` with stdout to ``out``: (peak RSS in MB, seconds, stderr)."""
    err, report = out.with_suffix(".err"), out.with_suffix(".rss")
    t = time.monotonic()
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([sys.executable, "-c", MEASURE, str(report), sys.executable,
                              "-m", "awty", *args], env=env, stdout=o, stderr=e,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            pytest.fail(f"awty {' '.join(args)} still running after {timeout:g} s")
    seconds = time.monotonic() - t
    kb, code = map(int, report.read_text().split())
    assert code == 0, (args, err.read_text())
    return kb / 1024, seconds, err.read_text()


def json_rows(n: int):
    def check(out: Path) -> None:
        with open(out) as f:
            rows = json.load(f)
        assert isinstance(rows, list) and len(rows) == n
    return check


def text_rows(n: int):
    def check(out: Path) -> None:
        with open(out) as f:
            assert sum(1 for _ in f) == n + 1  # a header line, then one per row
    return check


def export_lines(n: int):
    def check(out: Path) -> None:
        kinds: dict[str, int] = {}
        with open(out) as f:
            for line in f:
                k = next(iter(json.loads(line)))  # "format", "job", "history", "end"
                kinds[k] = kinds.get(k, 0) + 1
        assert kinds["job"] == n and kinds["history"] == n and kinds["end"] == 1, kinds
    return check


def any_json(out: Path) -> None:
    json.loads(out.read_text())


# Every read command, and what its output must hold.
READS = [
    (["list", "--json"], json_rows(N)),
    (["list", "--all"], text_rows(N)),
    (["history", "--json", "--limit", "0"], json_rows(N)),
    (["history", "--limit", "0"], text_rows(N)),
    (["export"], export_lines(N)),
    (["slots", "--json"], any_json),
    (["stats", "--json"], any_json),
    (["slots"], lambda out: None),
    (["stats"], lambda out: None),
]


def test_every_read_stays_flat(tmp_path, backend):
    home = tmp_path / "home"
    env = {**cli_env(home, T0), **backend.env}
    assert run_cli(["init"], env).returncode == 0
    started = time.monotonic()
    fill(home, backend.kw, N)
    print(f"\n{backend.kind}: {N:,} pending + {N:,} history filled in "
          f"{time.monotonic() - started:.1f} s")
    out = tmp_path / "out.txt"
    base, _, _ = read(["list", "--limit", "1", "--json"], env, out)
    print(f"  {'list --limit 1 --json':28} {base:7.1f} MB (the start-up a read grows from)")
    over = []
    for args, check in READS:
        rss, seconds, _ = read(args, env, out)
        check(out)
        print(f"  {' '.join(args):28} {rss:7.1f} MB  {seconds:6.1f} s")
        if rss - base > GROWTH_MB:
            over.append(f"awty {' '.join(args)}: {rss:.0f} MB, {rss - base:.0f} MB over "
                        f"a one-row read")
    assert not over, "\n".join(over)

    # Text tables are still cut: 100 rows by default, --limit N, and say so on stderr.
    _, _, err = read(["list"], env, out)
    text_rows(100)(out)
    assert err == f"… {N - 100:,} more (use --limit / --all)\n"
    _, _, err = read(["history", "--limit", "7"], env, out)
    text_rows(7)(out)
    assert err == "… more than 7 (use --limit N, or --limit 0 for all)\n"
    _, _, err = read(["list", "--limit", "3", "--json"], env, out)
    json_rows(3)(out)
    assert err == f"… {N - 3:,} more (use --limit / --all)\n"
    _, _, err = read(["history", "--failed", "--json", "--limit", "5"], env, out)
    assert [h["outcome"] for h in json.loads(out.read_text())] == ["failed"] * 5
    assert err == "… more than 5 (use --limit N, or --limit 0 for all)\n"
