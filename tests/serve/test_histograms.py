"""The histograms of /metrics and `awty metrics`: each delivery's and each slot run's duration
(from the executions the store records, so a cron runner's run shows in serve's scrape), and
serve's own request durations. A real run-slot against a real receiver moves their buckets."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

import servekit
from awty.slots import from_iso, iso

DELIVERY = "awty_delivery_duration_seconds_last_day"
RUN = "awty_run_duration_seconds_last_day"
REQUESTS = "awty_serve_request_duration_seconds"


def histograms(text: str) -> dict[str, dict[str, float]]:
    """name -> {le: cumulative count, "count": n, "sum": seconds}"""
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_bucket"):
                out.setdefault(s.name[:-7], {})[s.labels["le"]] = s.value
            elif s.name.endswith(("_gcount", "_count")):
                out.setdefault(s.name.rsplit("_", 1)[0], {})["count"] = s.value
            elif s.name.endswith(("_gsum", "_sum")):
                out.setdefault(s.name.rsplit("_", 1)[0], {})["sum"] = s.value
    return out


def scrape(served) -> dict[str, dict[str, float]]:
    m = served.call("GET", "/metrics", token=None)
    assert m.status == 200
    return histograms(m.raw.decode())


@pytest.mark.slow
def test_a_real_run_slot_moves_the_delivery_and_run_buckets(served, rx):
    rx.script("/slow", delay=0.3)
    before = scrape(served)
    assert before[DELIVERY]["+Inf"] == 0 and before[RUN]["+Inf"] == 0
    assert before[DELIVERY]["0.25"] == 0 and before[DELIVERY]["count"] == 0
    jobs = [served.call("POST", "/v1/jobs", {"target": rx.url("/slow"), "in": "1m"}).body
            for _ in range(3)]
    slot = jobs[0]["slot"]
    assert {j["slot"] for j in jobs} == {slot}
    # cron's runner, a process of its own, at the slot's boundary
    env = {**os.environ, **served.env,
           "AWTY_NOW": iso(from_iso(jobs[0]["next_check_at"]) + timedelta(seconds=1))}
    ran = subprocess.run([sys.executable, "-m", "awty", "--home", str(served.home), "run-slot",
                          slot], capture_output=True, text=True, timeout=120, env=env)
    assert ran.returncode == 0, ran.stderr
    assert len(rx.requests("/slow")) == 3

    after = scrape(served)
    d = after[DELIVERY]
    # each delivery waited 0.3 s for its answer: none at or under 0.25 s, all under 10 s
    assert (d["0.25"], d["10.0"], d["+Inf"], d["count"]) == (0, 3, 3, 3), d
    assert 0.9 <= d["sum"] < 30
    r = after[RUN]
    # one run; its three deliveries overlap or follow one another: 0.3 s to a few seconds
    assert (r["0.25"], r["+Inf"], r["count"]) == (0, 1, 1), r
    assert 0.3 <= r["sum"] < 30
    # serve's own requests: the three adds and the first scrape at least, each counted once
    assert after[REQUESTS]["count"] >= before[REQUESTS]["count"] + 4
    assert after[REQUESTS]["+Inf"] == after[REQUESTS]["count"]

    # `awty metrics` reads the same from the store, from any process
    text = servekit.awty(served.home, "metrics", env=served.env).stdout
    printed = histograms(text)
    assert printed[DELIVERY] == d and printed[RUN] == r
    assert REQUESTS not in printed  # a serve process's own figure
