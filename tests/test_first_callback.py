"""Issue 12, item 1: the first chunk is claimed and sent before the slot tree is reconciled,
and the reconciliation that runs beside the sending keeps what it did before: drop-ins
imported and fired in this run, orphans removed, this run's own files never counted as
orphans."""

import json

import awty.run.reconcile as reconcile
import awty.run.slotrun as slotrun
from awty.slots import slot_id
from helpers import db_rows, tree_files
from test_runner import fire, make


def _watch_reconcile(monkeypatch, home):
    """Record, when reconciling starts, how many jobs this run claimed and how many of
    them were started (handed to the wire)."""
    seen: list[tuple[int, int]] = []
    real = reconcile.Reconciler._reconcile

    def spy(self, slot, summary, claimed):
        started = sum(r["started"] is not None for r in db_rows(home, "job_lease"))
        seen.append((len(claimed), started))
        return real(self, slot, summary, claimed)

    monkeypatch.setattr(reconcile.Reconciler, "_reconcile", spy)
    return seen


def test_first_chunk_goes_out_before_reconciling(home, clock, rx, monkeypatch):
    a = make(home, clock, concurrency=4, batch_size=50)
    jobs = [a.add(rx.url(f"/j{i}"), in_="1m").job for i in range(120)]
    slot = jobs[0].next_check_at
    slot_dir = home / "slots" / slot_id(slot)
    (slot_dir / "dropped.json").write_text(json.dumps({"target": rx.url("/dropped")}))
    gone = a.add(rx.url("/gone"), in_="1m").job
    saved = (slot_dir / f"{gone.id}.json").read_bytes()
    a.cancel([gone.id])
    (slot_dir / f"{gone.id}.json").write_bytes(saved)  # an orphan
    seen = _watch_reconcile(monkeypatch, home)
    s = fire(a, clock, slot)
    # the first chunk was claimed and started (on the wire) before it (it runs on a thread of
    # its own, beside the claims that follow)
    assert len(seen) == 1 and seen[0][0] >= 4 and seen[0][1] >= 4
    assert s.imported == 1 and s.orphans_removed == 1 and s.rejected == 0
    assert s.ran == 121 and s.outcomes == {"done": 121}
    assert len(rx.requests("/dropped")) == 1 and rx.requests("/gone") == []
    assert sorted(r.path for r in rx.requests() if r.path.startswith("/j")) == sorted(
        f"/j{i}" for i in range(120))
    assert tree_files(home) == []


def test_a_slot_of_drop_ins_only_fires_them_in_this_run(home, clock, rx):
    a = make(home, clock)
    real = a.add(rx.url("/real"), in_="1m").job
    slot = real.next_check_at
    slot_dir = home / "slots" / slot_id(slot)
    a.cancel([real.id])
    slot_dir.mkdir(parents=True, exist_ok=True)
    for i in range(3):
        (slot_dir / f"d{i}.json").write_text(json.dumps({"target": rx.url(f"/d{i}")}))
    s = fire(a, clock, slot)
    assert s.imported == 3 and s.outcomes == {"done": 3}
    assert all(len(rx.requests(f"/d{i}")) == 1 for i in range(3))


def test_the_first_claim_is_one_chunk_and_the_next_waits_for_an_answer(home, clock, rx,
                                                                       monkeypatch):
    """A batch's claim before the first send would delay it (its rows become Jobs under the
    GIL): the run claims one chunk, sends it, and claims the next batch once a first answer
    is back (reconciling, due after PREPARE_AFTER, would release it too: not here)."""
    monkeypatch.setattr(slotrun, "PREPARE_AFTER", 600.0)
    a = make(home, clock, concurrency=4, batch_size=50)
    jobs = [a.add(rx.url(f"/j{i}"), in_="1m").job for i in range(120)]
    claims: list[tuple[int, int]] = []
    store_type = type(a.store)
    real = store_type.claim

    def spy(self, slot, **kw):
        claims.append((kw["limit"], len(rx.requests())))
        return real(self, slot, **kw)

    monkeypatch.setattr(store_type, "claim", spy)
    s = fire(a, clock, jobs[0].next_check_at)
    assert claims[0] == (4, 0)
    assert claims[1][0] == 50 and claims[1][1] >= 1
    assert s.ran == 120 and s.outcomes == {"done": 120}
    assert len(rx.requests()) == 120
