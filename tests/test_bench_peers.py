"""``scripts/bench --peers`` must not rot: drive its one peer that needs no install (awty
itself, the whole CLI as cron starts it) on a few jobs, and check the table it prints and the
section it puts into an existing report. The other peers are installed from PyPI by the bench
itself, never by the tests (no network here); their drivers are checked by the full run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scripts" / "bench"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bench targets Linux")
def test_bench_peers_awty_only(tmp_path):
    out = tmp_path / "BENCH.md"
    out.write_text("# awty benchmarks\n\nfigures\n\n<!-- peers:start -->\nstale\n"
                   "<!-- peers:end -->\n\ntail\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    proc = subprocess.run(
        [str(BENCH), "--peers", "--quick", "--peers-only", "awty", "--peers-jobs", "50",
         "--peers-timeout", "60", "--output", str(out), "--workdir", str(tmp_path / "work")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "awty beside the alternatives (50 jobs due at once)" in proc.stdout
    report = out.read_text()
    assert "stale" not in report
    assert report.startswith("# awty benchmarks\n\nfigures\n") and report.endswith("tail\n")
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in report.splitlines() if line.startswith("| ")}
    awty, skipped = rows[""].index("awty"), rows[""].index("APScheduler 3")
    assert rows["runs finished"][awty] == "1 of 1"
    assert rows["missing"][awty] == "0" and rows["duplicates"][awty] == "0"
    assert rows["signed callbacks"][awty] == "yes"
    assert rows["due → first callback"][awty].endswith(("ms", " s"))
    assert rows["runs finished"][skipped] == "skipped: not in --peers-only"
    for peer in ("awty (PostgreSQL)", "procrastinate"):  # the PostgreSQL peers (issue 34 #6)
        assert rows["runs finished"][rows[""].index(peer)] == "skipped: not in --peers-only"
    assert not any((tmp_path / "work").glob("run-*"))
