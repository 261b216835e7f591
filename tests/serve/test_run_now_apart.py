"""`POST /v1/jobs/{id}/run` sends the callback off the store's thread: a slow receiver holds
only that request, never the others."""

from __future__ import annotations

import threading
import time

import pytest

from awty.testing.receiver import Receiver


@pytest.mark.slow
def test_a_slow_receiver_does_not_hold_other_requests(served):
    with Receiver(delay=2.0) as slow:
        job = served.call("POST", "/v1/jobs", {"target": slow.url("/slow"), "in": "2h"}).body
        ran = []
        t = threading.Thread(target=lambda: ran.append(
            served.call("POST", f"/v1/jobs/{job['id']}/run")))
        t.start()
        try:
            slow.wait_for(1, "/slow", timeout=15)  # the callback is under way, 2 s to go
            started = time.monotonic()
            listed = served.call("GET", "/v1/jobs?limit=5")
            took = time.monotonic() - started
        finally:
            t.join(30)
        assert listed.status == 200
        assert took < 0.5, f"GET /v1/jobs waited {took:.2f} s behind the slow callback"
        assert ran and ran[0].status == 200 and ran[0].body["ran"] == 1, ran
    shown = served.call("GET", f"/v1/jobs/{job['id']}").body
    assert (shown["state"], shown["outcome"]) == ("ended", "done")
