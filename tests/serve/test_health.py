"""/healthz, /readyz and /metrics answer without a token (load balancers and Prometheus
scrape them so); they show counts, never a job's target or payload."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from awty.api import Awty
from awty.clock import FixedClock


@pytest.mark.slow
def test_health_ready_and_metrics_need_no_token(served):
    added = served.call("POST", "/v1/jobs", {"target": "http://127.0.0.1:9/secret-hook",
                                             "in": "2h", "payload": {"card": "4242"}})
    assert added.status == 201
    health = served.call("GET", "/healthz", token=None)
    assert health.status == 200 and health.body["ok"] is True
    ready = served.call("GET", "/readyz", token=None)
    assert ready.status == 200 and ready.body["missed_jobs"] == 0
    metrics = served.call("GET", "/metrics", token=None)
    text = metrics.raw.decode()
    assert metrics.status == 200 and "awty_pending_jobs" in text
    assert "awty_jobs_added_total 1.0" in text
    assert "secret-hook" not in text and "4242" not in text
    # a job left in a past slot: not ready (no runner fired it), still healthy
    with Awty(served.home, clock=FixedClock(datetime(2020, 1, 1, tzinfo=UTC)), env={},
              **served.extra["backend"].kw) as a:
        a.add("http://127.0.0.1:9/late", in_="1m")
    late = served.call("GET", "/readyz", token=None)
    assert late.status == 503 and late.body["missed_jobs"] == 1 and "catchup" in \
        late.body["detail"]
    assert served.call("GET", "/healthz", token=None).status == 200
