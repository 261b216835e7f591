"""A big batch's envelopes are written by a helper process (``awty.envwriter``) into
``<home>/.incoming/<batch>/`` while the batch is validated and inserted, and moved into their
slots once the rows are committed (issue 12 #3). The rules it keeps: rows first (no envelope
is in a slot before its row is committed), all or nothing (a refused batch leaves no file
anywhere), and an envelope the helper did not write is written directly."""

import json
import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

import awty.api as api
from awty.api import Awty
from awty.clock import FixedClock
from awty.errors import Conflict, InvalidInput
from awty.slotdir import envelope_bytes
from awty.slots import slot_id
from conftest import T0, db_rows, tree_files

N = 2 * api.STAGE_CHUNK + 300  # staged in chunks, the last part (< a chunk) written directly


def _specs(n, **extra):
    return [{"target": f"https://example.com/{i}", "in": f"{1 + i % 5}h",
             "payload": {"n": i}, **extra} for i in range(n)]


def _incoming(home):
    path = home / ".incoming"
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


def _writers():
    """This test process's envelope writers still running (a refused batch must leave none).
    Only its own children: another test run or user on the machine may be writing envelopes."""
    me = os.getpid()
    kids = " ".join(p.read_text() for p in Path(f"/proc/{me}/task").glob("*/children"))
    running = []
    for pid in kids.split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # ended since
        if b"envwriter.py" in cmd:
            running.append(pid)
    return running


def test_a_big_batch_lands_whole_in_its_slots(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        added = a.add_many(_specs(N))
    files = tree_files(home)
    assert len(files) == N == len(db_rows(home, "future_job"))
    for r in added[:: N // 7]:
        path = home / "slots" / slot_id(r.job.next_check_at) / f"{r.job.id}.json"
        assert path.read_bytes() == envelope_bytes(r.job)
        assert (path.stat().st_mode & 0o777) == 0o600
        assert json.loads(path.read_text())["payload"] == r.job.payload
    assert _incoming(home) == [] and _writers() == []


@pytest.mark.parametrize("why", ["a bad line", "a conflict"])
def test_a_refused_batch_leaves_no_file_anywhere(home, clock, why):
    with Awty(home, clock=clock, env={}) as a:
        if why == "a conflict":
            a.add("https://example.com/other", in_="1h", idempotency_key="k")
            specs = _specs(N)
            specs[-1] = {**specs[-1], "idempotency_key": "k"}  # names another job: refused
            with pytest.raises(Conflict):
                a.add_many(specs)
            kept = 1
        else:
            specs = _specs(N)
            specs[-5] = {"target": "https://example.com/x", "in": "soon"}
            with pytest.raises(InvalidInput, match=f"line {N - 4}"):
                a.add_many(specs)
            kept = 0
    assert len(db_rows(home, "future_job")) == kept == len(tree_files(home))
    assert _incoming(home) == [] and _writers() == []


def test_envelopes_are_written_directly_when_the_writer_cannot_start(home, clock,
                                                                     monkeypatch):
    real = subprocess.Popen
    refused = []

    def refuse(args, *a, **kw):
        if any("envwriter" in str(x) for x in args):
            refused.append(args)
            raise OSError("no processes left")
        return real(args, *a, **kw)

    monkeypatch.setattr(subprocess, "Popen", refuse)
    with Awty(home, clock=clock, env={}) as a:
        a.add_many(_specs(N))
    assert len(refused) == 1  # tried once (a new home too), then written directly
    assert len(tree_files(home)) == N and _incoming(home) == []


def test_envelopes_are_written_directly_when_the_writer_dies(home, clock, monkeypatch):
    # A writer that ends at once: every chunk it was sent is lost, and written after the commit.
    real_start = api._Staging._start
    killed = []

    def short_lived(self):
        real_start(self)
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            killed.append(self.proc.pid)

    monkeypatch.setattr(api._Staging, "_start", short_lived)
    with Awty(home, clock=clock, env={}) as a:
        added = a.add_many(_specs(N))
    assert len(killed) == 1  # the writer did start (a new home too), and died
    files = set(tree_files(home))
    assert len(files) == N and _incoming(home) == []
    assert all(f"{slot_id(r.job.next_check_at)}/{r.job.id}.json" in files for r in added)


def test_doctor_deletes_a_batch_left_by_an_add_cut_short(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        a.add_many(_specs(10))
        left = home / ".incoming" / "0123456789ab"
        left.mkdir(parents=True)
        (left / "01KXXXXXXXXXXXXXXXXXXXXXXX.json").write_text("{}")
    from awty.doctor import diagnose

    later = FixedClock(T0 + timedelta(days=365 * 10))  # the directory is old by then
    with Awty(home, clock=later, env={}) as a:
        found = [f for f in diagnose(a, env={}, which=lambda _: None).findings
                 if f.check == "incoming"]
        assert found and not found[0].ok
        fixed = [f for f in diagnose(a, repair=True, env={}, which=lambda _: None).findings
                 if f.check == "incoming"]
        assert fixed[0].repaired
    assert not left.exists() and len(tree_files(home)) == 10


def test_a_slot_without_a_directory_gets_the_staged_one_whole(home, clock, monkeypatch):
    # The staged <slot id>/ directory is renamed into slots/ in one step (one rename per slot,
    # not one per file): its files are the batch's, private, and nothing is left in .incoming.
    moved = []
    rename = os.rename

    def counting(src, dst, **kw):
        if str(src).isdigit():  # a slot id: a whole directory
            moved.append(src)
        return rename(src, dst, **kw)

    monkeypatch.setattr(os, "rename", counting)
    with Awty(home, clock=clock, env={}) as a:
        added = a.add_many(_specs(N))
    slots = {slot_id(r.job.next_check_at) for r in added}
    assert len(slots) == 5 and sorted(moved) == sorted(slots)
    for sid in slots:
        path = home / "slots" / sid
        assert (path.stat().st_mode & 0o777) == 0o700
        assert sorted(p.name for p in path.iterdir()) == sorted(
            f"{r.job.id}.json" for r in added if slot_id(r.job.next_check_at) == sid)
    assert _incoming(home) == []


def test_a_slot_that_has_files_keeps_them_and_gains_the_batch(home, clock):
    with Awty(home, clock=clock, env={}) as a:
        before = a.add("https://example.com/before", in_="1h")
        added = a.add_many(_specs(N))
    sid = slot_id(before.job.next_check_at)
    names = sorted(p.name for p in (home / "slots" / sid).iterdir())
    assert names == sorted([f"{before.job.id}.json"] + [
        f"{r.job.id}.json" for r in added if slot_id(r.job.next_check_at) == sid])
    assert len(tree_files(home)) == N + 1 == len(db_rows(home, "future_job"))
    assert _incoming(home) == []


@pytest.mark.parametrize("slots_there", [True, False])
def test_repeats_of_existing_jobs_leave_no_envelope_in_a_slot(home, clock, slots_there):
    # A batch whose keys name jobs already added: the store creates none of them, and the
    # envelopes staged under the new ids must not reach the slots (they would be strangers
    # there, jobs of no row), whether the slots' directories are there (a file at a time) or
    # not (each staged directory moved whole).
    specs = [{**s, "idempotency_key": f"k{i}"} for i, s in enumerate(_specs(N))]
    with Awty(home, clock=clock, env={}) as a:
        first = a.add_many(specs[: N // 2])
        if not slots_there:
            shutil.rmtree(home / "slots")
        again = a.add_many(specs)
    assert [r.created for r in again[: N // 2]] == [False] * (N // 2)
    assert all(r.created for r in again[N // 2:])
    assert [r.job.id for r in again[: N // 2]] == [r.job.id for r in first]
    rows = {r["id"] for r in db_rows(home, "future_job")}
    files = {f.split("/")[1][:-5] for f in tree_files(home)}
    assert len(rows) == N
    assert files == (rows if slots_there else rows - {r.job.id for r in first})
    assert _incoming(home) == []
