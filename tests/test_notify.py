"""notify_command: a real script run by real `awty run-slot` / `catchup` processes when a run
has failures (a real 127.0.0.1 receiver answering 404), and never otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.notify import after_run, send

AWTY = Path(sys.executable).parent / "awty"
NOW = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)


@pytest.fixture
def notified(tmp_path):
    """A notify script that writes its stdin, $1 and environment to files under tmp_path."""
    out = tmp_path / "notified"
    script = tmp_path / "notify.sh"
    script.write_text(f'#!/bin/sh\ncat > "{out}.json"\nprintf "%s" "$1" > "{out}.arg"\n'
                      f'printf "%s|%s" "$AWTY_NOTIFY_FAILED" "$AWTY_NOTIFY_TEXT" > "{out}.env"\n')
    script.chmod(0o755)
    # "$1" is the short text: the command line passes it on, as a user's would
    return {"command": f'{script} "$1"', "out": out}


def setup_home(home: Path, rx, notify_command: str, paths: list[str]) -> list[str]:
    home.mkdir(parents=True)
    (home / "awty.toml").write_text(f"notify_command = {json.dumps(notify_command)}\n")
    with Awty(home, clock=FixedClock(NOW), env={}) as a:
        return [a.add(rx.url(p), in_="1m", max_attempts=1).job.id for p in paths]


def run(home: Path, *args: str, at: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(AWTY), *args, "--home", str(home)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "AWTY_NOW": at})


def test_run_slot_with_failures_runs_the_command(home, rx, notified):
    rx.script("/bad", status=404)
    ids = setup_home(home, rx, notified["command"], ["/bad", "/ok"])
    p = run(home, "run-slot", "202611221015", at="2026-11-22T10:15:05Z")
    assert p.returncode == 0, p.stderr
    doc = json.loads(Path(f"{notified['out']}.json").read_text())
    assert doc["event"] == "failures" and doc["run"] == "run-slot" and doc["failed"] == 1
    assert [j["id"] for j in doc["failed_jobs"]] == [ids[0]]
    assert doc["summary"]["outcomes"] == {"done": 1, "failed": 1}
    arg = Path(f"{notified['out']}.arg").read_text()
    assert arg.startswith("awty run-slot: slot 202611221015: 1 done, 1 failed")
    assert Path(f"{notified['out']}.env").read_text() == f"1|{arg}"


def test_catchup_with_failures_runs_it_once(home, rx, notified):
    rx.script("/bad", status=404)
    setup_home(home, rx, notified["command"], ["/bad"])
    p = run(home, "catchup", at="2026-11-22T11:00:05Z")
    assert p.returncode == 0, p.stderr
    doc = json.loads(Path(f"{notified['out']}.json").read_text())
    assert doc["run"] == "catchup" and doc["failed"] == 1


def test_no_failures_no_notification(home, rx, notified):
    setup_home(home, rx, notified["command"], ["/ok"])
    assert run(home, "run-slot", "202611221015", at="2026-11-22T10:15:05Z").returncode == 0
    assert not Path(f"{notified['out']}.json").exists()


def test_a_failing_command_is_reported_not_fatal(home, rx):
    rx.script("/bad", status=404)
    setup_home(home, rx, "echo mail server down >&2; exit 7", ["/bad"])
    p = run(home, "run-slot", "202611221015", at="2026-11-22T10:15:05Z")
    assert p.returncode == 0
    assert "awty: notify_command exited 7: mail server down" in p.stderr


def test_a_hanging_command_is_killed_at_the_deadline(tmp_path):
    doc = {"text": "t", "failed": 1, "home": str(tmp_path)}
    start = time.monotonic()
    sent = send(f"sleep 30 & sleep 30; touch {tmp_path}/finished", doc, timeout=0.5)
    assert time.monotonic() - start < 10
    assert "killed" in sent.error and not (tmp_path / "finished").exists()


def test_library_does_nothing_without_the_setting(awty):
    summary = {"slot": "202611221015", "outcomes": {"failed": 3}}
    assert after_run(awty, "run-slot", summary, NOW) is None


def test_the_setting_is_text_from_the_file_or_the_environment(tmp_path):
    from awty.config import load
    from awty.errors import InvalidInput

    assert load(tmp_path, {}).notify_command is None
    assert load(tmp_path, {"AWTY_NOTIFY_COMMAND": 'page "$1"'}).notify_command == 'page "$1"'
    with pytest.raises(InvalidInput, match="notify_command: bad value 5 .must be a shell"):
        load(tmp_path, {}, file_data={"notify_command": 5})
