"""``awty run-slot`` without Typer (issue 12, item 1): the quick path reads exactly what the
Typer command reads, hands everything else to the Typer app, and never imports typer; cron's
run then behaves as before (output, exit codes, errors)."""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

import awty.cli.runs as runs
from awty import Awty
from awty.cli import app
from awty.cli.quickrun import parse
from awty.clock import FixedClock
from awty.slots import slot_id
from helpers import db_rows

T0 = datetime(2026, 11, 22, 14, 2, tzinfo=UTC)
READ = [
    [],
    ["202611221415"],
    ["202611221415", "--shard", "1/2", "--dry-run", "--json"],
    ["--shard=2/2", "202611221415", "--home", "/tmp/somewhere"],
    ["--home=/tmp/x", "--json"],
    ["--dry-run"],
    ["2026-11-22"],  # not a slot id: the body's own error, same on both paths
    ["202611221415", "--shard", "x"],
]

LEFT_TO_TYPER = [
    ["--help"], ["-h"], ["--oops"], ["--shard"], ["--shard", "-1/2"], ["a", "b"],
    ["--json", "--json"], ["--dry-run=yes"], ["--home", ""], ["--", "202611221415"],
    ["--utc"], ["--shard", "1/2", "--shard", "2/2"], ["-"], ["--dry"],
]


@pytest.mark.parametrize("args", READ)
def test_quick_path_reads_what_typer_reads(args, monkeypatch):
    seen = {}

    def capture(open_awty, slot, shard, dry_run, as_json, home):
        seen.update(slot=slot, shard=shard, dry_run=dry_run, as_json=as_json, home=home)

    monkeypatch.setattr(runs, "run_slot_body", capture)
    res = CliRunner().invoke(app, ["run-slot", *args])
    assert res.exit_code == 0, res.output
    assert parse(args) == seen


@pytest.mark.parametrize("args", LEFT_TO_TYPER)
def test_anything_unsure_is_left_to_typer(args):
    assert parse(args) is None


def _awty(home, *args, now=None):
    code = ("import sys, runpy\nsys.argv=['awty', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('awty', run_name='__main__')\nexcept SystemExit as e:\n"
            "    code = e.code\nelse:\n    code = 0\n"
            "print('TYPER', 'typer' in sys.modules, file=sys.stderr)\nsys.exit(code)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
    env.update(AWTY_HOME=str(home), AWTY_SIGNING_SECRET="")
    if now is not None:
        env["AWTY_NOW"] = now
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.slow
def test_plain_run_slot_never_imports_typer_and_errors_are_unchanged(home, rx):
    with Awty(home, clock=FixedClock(T0), env={}) as a:
        job = a.add(rx.url("/hook"), in_="20m").job
    slot = job.next_check_at
    now = (slot + timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    p = _awty(home, "run-slot", slot_id(slot), "--json", now=now)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["outcomes"] == {"done": 1} and doc["slot"] == slot_id(slot)
    assert "TYPER False" in p.stderr and len(rx.requests("/hook")) == 1
    assert db_rows(home, "future_job") == []
    # the library's error: one line, exit 2, still without Typer
    p = _awty(home, "run-slot", "2026-11-22", now=now)
    assert p.returncode == 2 and "TYPER False" in p.stderr
    assert p.stderr.splitlines()[0].startswith("awty: ")
    p = _awty(home, "run-slot", "--shard", "3/2", now=now)
    assert p.returncode == 2 and p.stderr.splitlines()[0] == (
        "awty: --shard '3/2': need 1 <= i <= n") and "TYPER False" in p.stderr
    # a slot still to come: exit 2 as before
    p = _awty(home, "run-slot", slot_id(slot + timedelta(hours=1)), now=now)
    assert p.returncode == 2 and "is in the future" in p.stderr
    # the parser's error: Typer's one line, as before
    p = _awty(home, "run-slot", "--shard", now=now)
    assert p.returncode == 2 and "TYPER True" in p.stderr
    assert p.stderr.splitlines()[0] == ("awty: Option '--shard' requires an argument.  "
                                        "(see --help)")
