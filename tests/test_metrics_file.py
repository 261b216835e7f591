"""metrics_file: real `awty run-slot` and `awty catchup` processes write `awty metrics`' text
to the file after each run, atomically (no half file, no temp file left), for node_exporter's
textfile collector; a file that cannot be written is one stderr line and the run's exit code
stays its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from awty.api import Awty
from awty.clock import FixedClock

AWTY = Path(sys.executable).parent / "awty"
NOW = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)


def run(home: Path, *args: str, at: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(AWTY), *args, "--home", str(home)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "AWTY_NOW": at})


def setup_home(home: Path, target: Path, urls: list[str]) -> None:
    home.mkdir(parents=True)
    (home / "awty.toml").write_text(f"metrics_file = {json.dumps(str(target))}\n")
    with Awty(home, clock=FixedClock(NOW), env={}) as a:
        for i, url in enumerate(urls):
            a.add(url, in_=f"{1 + 15 * i}m", max_attempts=1)


@pytest.mark.slow
def test_run_slot_and_catchup_write_the_metrics_file(tmp_path, rx):
    rx.script("/bad", status=404)
    home, collector = tmp_path / "home", tmp_path / "textfile"
    collector.mkdir()
    target = collector / "awty.prom"
    setup_home(home, target, [rx.url("/ok"), rx.url("/bad")])
    p = run(home, "run-slot", "202611221015", at="2026-11-22T10:15:05Z")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    text = target.read_text()
    assert 'awty_outcomes_last_day{outcome="done"} 1.0' in text
    assert 'awty_pending_jobs{window="15m"} 1.0' in text
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    p = run(home, "catchup", at="2026-11-22T10:30:05Z")
    assert p.returncode == 0, p.stderr
    text = target.read_text()
    assert 'awty_outcomes_last_day{outcome="failed"} 1.0' in text
    assert sorted(f.name for f in collector.iterdir()) == ["awty.prom"]  # no temp file left
    # what `awty metrics` prints, less the times that moved
    shown = run(home, "metrics", at="2026-11-22T10:30:05Z").stdout
    assert shown.rstrip("\n") == text.rstrip("\n")


def test_an_unwritable_metrics_file_is_one_line_and_the_run_stands(tmp_path, rx):
    home = tmp_path / "home"
    setup_home(home, tmp_path / "missing-dir" / "awty.prom", [rx.url("/ok")])
    p = run(home, "run-slot", "202611221015", at="2026-11-22T10:15:05Z")
    assert p.returncode == 0
    assert p.stderr.startswith("awty: metrics_file ") and "No such file" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert len(rx.requests("/ok")) == 1
