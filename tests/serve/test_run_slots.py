"""`awty serve --run-slots` fires the slots itself (a catch-up at start, then each boundary),
through the same slot locks and leases as cron's runner: the two never fire a job twice."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta

import pytest

import servekit

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import iso



@pytest.mark.slow
def test_serve_and_a_cron_runner_never_double_fire(tmp_path, backend, rx):
    from datetime import UTC, datetime

    home = tmp_path / "home"
    env = dict(backend.env)
    assert servekit.awty(home, "init", env=env).returncode == 0
    then = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)
    n = 300
    with Awty(home, clock=FixedClock(then), env={}, **backend.kw) as a:
        added = a.add_many([{"target": rx.url("/hit"), "in": "1m", "payload": {"n": i}}
                            for i in range(n)])
    ids = {r.job.id for r in added}
    env["AWTY_NOW"] = iso(then + timedelta(hours=1))  # the slot is past: both catch up
    server = servekit.start(home, env, "--no-auth", "--run-slots")
    try:
        cron = subprocess.run([sys.executable, "-m", "awty", "--home", str(home), "catchup"],
                              capture_output=True, text=True, timeout=300,
                              env={**__import__("os").environ, **env})
        assert cron.returncode == 0, cron.stderr
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(rx.requests("/hit")) < n:
            time.sleep(0.1)
        time.sleep(1)  # anything sent twice would have arrived by now
        got = [json.loads(r.body)["id"] for r in rx.requests("/hit")]
        assert sorted(got) == sorted(ids), (len(got), len(set(got)))
        done = server.call("GET", "/v1/history?outcome=done&limit=1000").body["history"]
        assert {h["id"] for h in done} == ids
    finally:
        server.stop()


@pytest.mark.slow
def test_serve_run_slots_catches_up_at_start_by_itself(tmp_path, rx):
    from datetime import UTC, datetime

    home = tmp_path / "home"
    then = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)
    with Awty(home, clock=FixedClock(then), env={}) as a:
        a.add_many([{"target": rx.url("/hit"), "in": "1m"} for _ in range(20)])
    env = {"AWTY_NOW": iso(then + timedelta(hours=1))}
    server = servekit.start(home, env, "--no-auth", "--run-slots")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(rx.requests("/hit")) < 20:
            time.sleep(0.1)
        done = server.call("GET", "/v1/history?outcome=done").body["history"]
        assert len(done) == 20 and {h["pid"] for h in done} == {server.proc.pid}
    finally:
        server.stop()
