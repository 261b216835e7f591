"""Issue 28 #3: one NUL byte poisons nothing. Real ``awty`` processes, a real receiver on
127.0.0.1, real exec jobs, on both stores:

- a response body holding a NUL, bytes that are not UTF-8 and an encoded lone surrogate, and
  exec jobs printing the same (on stdout and stderr, ending done or failed), among ordinary
  jobs of the same slot: ``run-slot`` exits 0, each job is delivered once, its batch-mates are
  done, ``history --json`` reads, ``show`` prints the escaped text (``\\x00``, ``\\xff``), and
  a later catch-up past the lease sends nothing again. Before: PostgreSQL refused the whole
  batch's write (``invalid byte sequence for encoding "UTF8": 0x00``), run-slot exited 1 and the
  batch was sent again each lease period, for ever;
- a result the database refuses for another reason (a trigger refusing one history row, as a
  constraint would) fails that job alone, saying why; its batch-mates (in the same write)
  are done, each delivered once. Before: the batch's write failed whole, run-slot exited 1.

(Run with ``store_process = "on"`` too: the write then happens in the store process.)
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from awty.testing.receiver import Receiver, Reply
from helpers import T0
from relkit import cli_env, lease_passes, refuse_history_rows, run_cli

pytestmark = pytest.mark.reliability
both = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
via = pytest.mark.parametrize("store_process", ["off", "on"])

BAD = b"ok\x00 then \xff\xfe bad \xed\xa0\x80 end"  # NUL, not UTF-8, an encoded surrogate
SHOWN = r"ok\x00 then \xff\xfe bad \xed\xa0\x80 end"  # what every store keeps of it
PRINTS = r"printf 'a\000b\377c'; printf 'e\000rr' >&2"


def _env(home, backend, now, **settings) -> dict[str, str]:
    return {**cli_env(home, now, **settings), **backend.env}


def _add(home, backend, specs: list[dict]) -> list[str]:
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        return [r.job.id for r in a.add_many(specs)]


def _history(home, backend, now) -> dict[str, dict]:
    got = run_cli(["history", "--json", "--limit", "1000"], _env(home, backend, now))
    assert got.returncode == 0, got.stderr
    rows = json.loads(got.stdout)
    return {h["id"]: h for h in rows}


def _pending(home, backend) -> int:
    with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
        return a.count()


def _later_catchup_sends_nothing(home, backend, rx, slot, before: dict) -> None:
    """Past every lease, a catch-up finds nothing to send: no job was left to be re-sent."""
    later = slot + timedelta(hours=3)
    if backend.kind == "postgres":
        lease_passes(backend.kw, by=timedelta(hours=3))
    again = run_cli(["catchup"], _env(home, backend, later))
    assert again.returncode == 0, again.stderr
    assert rx.counts() == before


@pytest.mark.slow
@both
@via
def test_a_nul_in_an_answer_poisons_nothing(home, backend, store_process):
    with Receiver() as rx:
        rx.script("/bad", Reply(status=200, body=BAD))
        rx.script("/bad500", Reply(status=500, body=BAD))
        plain = _add(home, backend, [{"target": rx.url("/ok"), "in": "1m"} for _ in range(20)])
        bad, bad500, printed, failed = _add(home, backend, [
            {"target": rx.url("/bad"), "in": "1m"},
            {"target": rx.url("/bad500"), "in": "1m", "max_attempts": 1},
            {"target": PRINTS, "kind": "exec", "in": "1m"},
            {"target": PRINTS + "; exit 3", "kind": "exec", "in": "1m", "max_attempts": 1},
        ])
        with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
            slot = a.get(bad).job.next_check_at
        now = slot + timedelta(seconds=1)
        run = run_cli(["run-slot", slot_id(slot)],
                      _env(home, backend, now, store_process=store_process))
        assert run.returncode == 0, run.stderr
        delivered = rx.counts()
        assert delivered == {i: 1 for i in [*plain, bad, bad500]}
        assert _pending(home, backend) == 0

        hist = _history(home, backend, now)
        assert {i: hist[i]["outcome"] for i in [*plain, bad, printed]} == dict.fromkeys(
            [*plain, bad, printed], "done")
        assert hist[bad500]["outcome"] == hist[failed]["outcome"] == "failed"
        assert hist[bad]["output"] == SHOWN
        assert hist[bad500]["output"] == SHOWN
        assert hist[printed]["output"] == "a\\x00b\\xffc\n--- stderr ---\ne\\x00rr"

        shown = run_cli(["show", bad], _env(home, backend, now))
        assert shown.returncode == 0, shown.stderr
        assert SHOWN in shown.stdout and "\0" not in shown.stdout
        shown = run_cli(["show", failed], _env(home, backend, now))
        assert shown.returncode == 0, shown.stderr
        assert "a\\x00b\\xffc" in shown.stdout and "\0" not in shown.stdout

        _later_catchup_sends_nothing(home, backend, rx, slot, delivered)


@pytest.mark.slow
@both
@via
def test_a_result_the_store_refuses_fails_that_job_alone(home, backend, store_process):
    n = 40
    with Receiver() as rx:
        rx.script("/poison", Reply(status=200, body=b"poison"))
        ids = _add(home, backend, [{"target": rx.url("/ok"), "in": "1m"} for _ in range(n)])
        [poisoned] = _add(home, backend, [{"target": rx.url("/poison"), "in": "1m"}])
        ids += _add(home, backend, [{"target": rx.url("/ok"), "in": "1m"} for _ in range(n)])
        refuse_history_rows(home, backend, "output", "%poison%", "poisoned row")
        with Awty(home, clock=FixedClock(T0), env={}, **backend.kw) as a:
            slot = a.get(poisoned).job.next_check_at
        now = slot + timedelta(seconds=1)
        # one batch, written once at the end: the refused row shares its write with all
        run = run_cli(["run-slot", slot_id(slot)],
                      _env(home, backend, now, store_process=store_process,
                           batch_size=1000, concurrency=4))
        assert run.returncode == 0, run.stderr
        assert "1 failed" in run.stderr, run.stderr
        delivered = rx.counts()
        assert delivered == {i: 1 for i in [*ids, poisoned]}
        assert _pending(home, backend) == 0

        hist = _history(home, backend, now)
        assert {hist[i]["outcome"] for i in ids} == {"done"}
        assert hist[poisoned]["outcome"] == "failed"
        assert hist[poisoned]["reason"].startswith("its result could not be stored: ")
        assert "poisoned row" in hist[poisoned]["reason"]
        assert hist[poisoned]["output"] is None and hist[poisoned]["last_status"] == 200
        print(f"\n[{backend.kind}/{store_process}] {hist[poisoned]['reason']}")

        _later_catchup_sends_nothing(home, backend, rx, slot, delivered)
