"""SPEC 12 under load: many jobs over many slots, run by ``awty catchup`` (a real process),
against a receiver that fails 10 % of requests (status 500) at seeded random. Every job ends
``done`` or ``failed`` exactly as its attempts dictate, and the totals add up exactly: the
failure of each (job, attempt) is a pure function of the seed, so the expected number of
requests and the outcome of every single job are known in advance.

CI: 5,000 jobs over 20 slots; ``AWTY_FULL=1``: 100,000 jobs over 100 slots."""

from __future__ import annotations

import time
import zlib
from collections import Counter
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import current_slot
from helpers import EXECUTIONS, T0
from awty.testing.receiver import Receiver
from relkit import account, cli_env, count, query, run_cli, scale

pytestmark = pytest.mark.reliability

SEED = 1111
FAIL_PER_MILLE = 100  # 10 %


def fails(job_id: str, attempt: int) -> bool:
    return zlib.crc32(f"{SEED}:{job_id}:{attempt}".encode()) % 1000 < FAIL_PER_MILLE


def expected(job_id: str, max_attempts: int) -> tuple[str, int]:
    """(outcome, requests) for a job that may be tried ``max_attempts`` times."""
    for attempt in range(1, max_attempts + 1):
        if not fails(job_id, attempt):
            return "done", attempt
    return "failed", max_attempts


@pytest.mark.slow
def test_load_with_ten_percent_failures(tmp_path):
    n = scale(5000, 100_000)
    slots = scale(20, 100)
    home = tmp_path / "home"
    started = time.monotonic()
    with Receiver(reply=lambda r: 500 if fails(r.job_id, r.attempt) else 204, keep=False) as rx:
        with Awty(home, clock=FixedClock(T0), env={}) as a:
            base = current_slot(T0, a.settings.resolution)
            specs = [{"target": rx.url("/load"),
                      "at": (base + timedelta(minutes=15 * (1 + i % slots))).isoformat(),
                      "payload": {"i": i},
                      # half may try twice (≈1 % of them fail for good), half six times
                      "max_attempts": 2 if i % 2 else 6} for i in range(n)]
            t0 = time.monotonic()
            added = a.add_many(specs)
            add_s = time.monotonic() - t0
        limits = {r.job.id: s["max_attempts"] for r, s in zip(added, specs, strict=True)}
        assert len({r.job.next_check_at for r in added}) == slots
        now = base + timedelta(minutes=15 * slots, seconds=30)
        rounds, runs_s = 0, 0.0
        while count(home, "future_job") and rounds < 12:  # retries land in later slots
            rounds += 1
            t0 = time.monotonic()
            p = run_cli(["catchup", "--json"], cli_env(home, now, concurrency=64), timeout=600)
            runs_s += time.monotonic() - t0
            assert p.returncode == 0, p.stderr[-2000:]
            now += timedelta(hours=1)
        delivered = rx.counts()
        total = rx.total
    want = {j: expected(j, m) for j, m in limits.items()}
    figures = account(home, list(limits), now, outcomes={"done", "failed"},
                      delivered=delivered)
    hist = {r[0]: (r[1], r[2]) for r in query(home, "SELECT id, outcome, attempts "
                                                    "FROM job_history")}
    wrong = {j: (hist[j], want[j]) for j in want if hist[j] != want[j]}
    assert not wrong, f"{len(wrong)} job(s) ended other than their attempts dictate: " \
                      f"{list(wrong.items())[:5]}"
    off = {j: (delivered.get(j), want[j][1]) for j in want if delivered.get(j) != want[j][1]}
    assert not off, f"{len(off)} job(s) got another number of requests: {list(off.items())[:5]}"
    events = Counter(dict(query(home, f"SELECT job_id, count(*) FROM {EXECUTIONS} GROUP BY job_id")))
    assert events == Counter(delivered)  # one recorded execution per request
    outcomes = Counter(o for o, _ in hist.values())
    assert outcomes["done"] + outcomes["failed"] == n
    assert sum(a for _, a in hist.values()) == total == sum(want[j][1] for j in want)
    assert figures["duplicates"] == sum(want[j][1] - 1 for j in want)  # retries, nothing else
    print(f"\n[load] jobs={n} slots={slots} requests={total} (500s: "
          f"{total - outcomes['done']}) done={outcomes['done']} "
          f"failed={outcomes['failed']} catchup rounds={rounds} add_many={add_s:.1f}s "
          f"catchup={runs_s:.1f}s ({total / runs_s:.0f} req/s) "
          f"time={time.monotonic() - started:.1f}s")
