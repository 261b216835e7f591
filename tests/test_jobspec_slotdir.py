"""Unit tables for ``jobspec.build`` (every guard at add time) and the slot tree's envelope
naming and reading (``awty/slottree``)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from awty import jobspec
from awty.config import Settings
from awty.errors import InvalidInput
from awty.model import Kind
from awty.slottree.staging import envelope_bytes
from awty.slottree.tree import SlotTree

NOW = datetime(2026, 11, 22, 10, 7, 12, tzinfo=UTC)
SLOT = datetime(2026, 11, 22, 10, 15, tzinfo=UTC)
URL = "https://example.com/"
ID = "01JD4X00000000000000000000"


@pytest.mark.parametrize("spec, want", [
    ({"target": URL, "in": "1m"}, (Kind.HTTP, SLOT)),
    ({"target": URL, "at": "2026-11-22T10:15:00Z"}, (Kind.HTTP, SLOT)),  # on a boundary: that slot
    ({"target": URL, "at": "2026-11-22T10:15:01Z"}, (Kind.HTTP, SLOT.replace(minute=30))),
    ({"target": "json.decoder:JSONDecoder", "kind": "python", "in": "1m"}, (Kind.PYTHON, SLOT)),
    ({"target": "echo hi", "kind": "exec", "in": "1m"}, (Kind.EXEC, SLOT)),
    ({"target": URL, "in": "1m", "idempotency_key": "k"}, (Kind.HTTP, SLOT)),
])
def test_build_accepts(spec, want):
    job, fp = jobspec.build(spec, now=NOW, settings=Settings())
    assert (job.kind, job.next_check_at) == want
    assert job.next_check_at >= job.first_check_at  # never before it is due
    assert fp == (jobspec.fingerprint(job) if job.idempotency_key else None)


def test_a_whole_number_may_come_as_json_s_3_0():
    # JSON (and JSON Schema's "integer") has 3.0 for 3: the fuzzer sends it so
    job, _ = jobspec.build({"target": URL, "in": "1m", "max_attempts": 3.0, "max_checks": 0.0},
                           now=NOW, settings=Settings())
    assert (job.max_attempts, job.max_checks) == (3, 0)
    assert type(job.max_attempts) is int


@pytest.mark.parametrize("spec, message", [
    ({"in": "1m"}, "target: missing"),
    ({"target": URL}, "missing time"),
    ({"target": URL, "in": "1m", "at": "2026-11-23 10:00"}, "either at or in"),
    ({"target": URL, "kind": "ftp", "in": "1m"}, "kind: 'ftp'"),
    ({"target": "ftp://example.com/", "in": "1m"}, "only http:// and https://"),
    ({"target": URL, "in": "1m", "payload": "x" * 5000}, "max_payload_bytes"),
    ({"target": URL, "in": "1m", "headers": {"Host": "x"}}, "Host is set by awty"),
    ({"target": URL, "in": "1m", "bogus": 1}, "unknown field"),
    ({"target": URL, "in": "-1m"}, "not a duration"),
    ({"target": URL, "in": "1m", "id": "nope"}, "not an awty id"),
    ({"target": "mod fn", "kind": "python", "in": "1m"}, "not package.module:function"),
    ({"target": URL, "in": "1m", "max_attempts": 2.5}, "max_attempts: 2.5 is not a whole"),
    ({"target": URL, "in": "1m", "max_checks": float("inf")}, "max_checks: inf is not a"),
])
def test_build_refuses(spec, message):
    with pytest.raises(InvalidInput, match=message):
        jobspec.build(spec, now=NOW, settings=Settings())


@pytest.mark.parametrize("name, job_id", [
    (f"{ID}.json", ID),
    (f"{ID.lower()}.json", None),  # ids are upper case: anything else is a drop-in
    (f"{ID}.json.tmp", None),
    ("partner-7.json", None),
    (f"{ID}", None),
])
def test_entry_names(tmp_path, name, job_id):
    tree = SlotTree(tmp_path)
    tree.slot_path(SLOT).mkdir(parents=True)
    (tree.slot_path(SLOT) / name).write_text("{}")
    [entry] = list(tree.entries(SLOT))
    assert (entry.name, entry.job_id) == (name, job_id)


@pytest.mark.parametrize("plant, message", [
    ("symlink", "symlink"),
    ("directory", "not a regular file"),
    ("not json", "JSON"),
])
def test_read_refuses(tmp_path, plant, message):
    tree = SlotTree(tmp_path)
    d = tree.slot_path(SLOT)
    d.mkdir(parents=True)
    path = d / "x.json"
    if plant == "symlink":
        (tmp_path / "t.json").write_text("{}")
        os.symlink(tmp_path / "t.json", path)
    elif plant == "directory":
        path.mkdir()
    else:
        path.write_text("{nope")
    [entry] = list(tree.entries(SLOT))
    with pytest.raises(ValueError, match=message):
        tree.read(entry)


def test_write_then_read_round_trips(tmp_path):
    tree = SlotTree(tmp_path)
    job, _ = jobspec.build({"target": URL, "in": "1m", "payload": {"a": 1}}, now=NOW,
                           settings=Settings())
    tree.write(job)
    [entry] = list(tree.entries(job.next_check_at))
    assert entry.job_id == job.id
    data = tree.read(entry)
    assert data["target"] == URL and json.loads(json.dumps(data["payload"])) == {"a": 1}
    tree.close()


def test_a_slot_directory_removed_under_an_open_tree_is_made_again(tmp_path):
    # A tree keeps a descriptor per slot directory; when the directory goes (a runner retired
    # it, an operator removed it), the next envelope must land in a new one. Creating a file
    # in a removed directory fails ENOENT, or EPERM for an O_TMPFILE one.
    import shutil

    tree = SlotTree(tmp_path)
    first, second = (jobspec.build({"target": URL, "in": "1m"}, now=NOW,
                                   settings=Settings())[0] for _ in range(2))
    tree.write(first)
    shutil.rmtree(tree.slot_path(SLOT))
    tree.write(second)
    assert [e.job_id for e in tree.entries(SLOT)] == [second.id]
    tree.close()


def test_an_envelope_lands_in_its_own_slot_while_another_thread_fills_the_cache(tmp_path,
                                                                                 monkeypatch):
    # A runner writes envelopes from several threads (two slots' recorders in a catch-up, the
    # reconciler). The tree caches one descriptor per slot and evicts the oldest past 256: a
    # descriptor closed by another thread while a write is using it can be reopened as
    # another slot's, and the envelope would land there. Writer A pauses inside its write
    # (after taking its slot's descriptor) until writer B has written into 300 other slots,
    # or 0.5 s (B waits for A's write to end, when the tree keeps them apart).
    import threading

    from awty.slottree import tree as treemod

    tree = SlotTree(tmp_path)
    settings = Settings()
    a_job = jobspec.build({"target": URL, "in": "1m"}, now=NOW, settings=settings)[0]
    b_jobs = [jobspec.build({"target": URL, "in": f"{16 * (i + 1)}m"}, now=NOW,
                            settings=settings)[0] for i in range(300)]
    assert len({j.next_check_at for j in b_jobs} | {a_job.next_check_at}) == 301
    a_inside, b_done = threading.Event(), threading.Event()
    real = {"_link_new": treemod._link_new, "_rename_into": treemod._rename_into}

    def pausing(name):
        def write(dfd, final, data):
            if final == f"{a_job.id}.json":
                a_inside.set()
                b_done.wait(0.5)
            return real[name](dfd, final, data)
        return write

    for name in real:
        monkeypatch.setattr(treemod, name, pausing(name))
    a = threading.Thread(target=tree.write, args=(a_job,))
    a.start()
    assert a_inside.wait(5)

    def fill():
        tree.write_many(b_jobs)
        b_done.set()

    b = threading.Thread(target=fill)
    b.start()
    a.join(10)
    b.join(10)
    assert not a.is_alive() and not b.is_alive()
    assert [e.job_id for e in tree.entries(a_job.next_check_at)] == [a_job.id]
    for job in b_jobs:
        assert [e.job_id for e in tree.entries(job.next_check_at)] == [job.id]
    tree.close()


def test_a_batch_memo_reads_each_value_as_itself():
    # One memo serves a whole batch; a value equal to a remembered one but of another type
    # (True == 1, 1 == 1.0) must still be read, and refused, on its own.
    memo: dict = {}
    one, _ = jobspec.build({"target": URL, "at": 1}, now=NOW, settings=Settings(),
                           local=UTC, memo=memo)
    assert one.first_check_at == datetime(2026, 11, 23, 1, tzinfo=UTC)  # 1 is the hour
    with pytest.raises(InvalidInput, match="at: True is not a time"):
        jobspec.build({"target": URL, "at": True}, now=NOW, settings=Settings(), memo=memo)
    again, _ = jobspec.build({"target": URL, "at": 1}, now=NOW, settings=Settings(),
                             local=UTC, memo=memo)
    assert again.next_check_at == one.next_check_at and again.id != one.id


def test_a_batch_memo_keeps_no_refused_url():
    memo: dict = {}
    for _ in range(2):
        with pytest.raises(InvalidInput, match="only http:// and https://"):
            jobspec.build({"target": "ftp://example.com/", "in": "1m"}, now=NOW,
                          settings=Settings(), memo=memo)
    job, _ = jobspec.build({"target": f" {URL} ", "in": "1m"}, now=NOW, settings=Settings(),
                           memo=memo)
    assert job.target == URL
    job, _ = jobspec.build({"target": f" {URL} ", "kind": "exec", "in": "1m"}, now=NOW,
                           settings=Settings(), memo=memo)
    assert job.target == f" {URL} "  # an exec target is a command, never a remembered URL


def test_envelopes_of_a_batch_read_as_one_alone(tmp_path):
    job, _ = jobspec.build({"target": URL, "in": "1m", "entity": "é\u2028", "key": None,
                            "headers": {"X-A": "b"}}, now=NOW, settings=Settings())
    isos: dict = {}
    assert envelope_bytes(job, isos) == envelope_bytes(job) == envelope_bytes(job, isos)
    assert json.loads(envelope_bytes(job))["entity"] == "é\u2028"


def test_a_batch_file_is_split_by_lines_and_bytes(tmp_path, monkeypatch):
    """A slot's share of a batch is cut into files of at most BATCH_MAX lines and BATCH_BYTES
    (so the reader's MAX_BATCH_BYTES never refuses a file awty wrote), each named by its
    smallest id and holding whole lines."""
    from awty.slottree import staging

    now = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    settings = Settings()
    jobs = [jobspec.build({"target": "https://example.com/", "in": "1h",
                           "payload": {"pad": "x" * (10 if i < 7 else 900)}},
                          now=now, settings=settings)[0] for i in range(10)]
    monkeypatch.setattr(staging, "BATCH_MAX", 3)
    monkeypatch.setattr(staging, "BATCH_BYTES", 1500)
    tree = SlotTree(tmp_path)
    assert tree.write_many(jobs) == 10
    (sdir,) = (tmp_path / "slots").iterdir()
    files = sorted(sdir.iterdir())
    held = []
    for f in files:
        ids = [json.loads(line)["id"] for line in f.read_text().splitlines()]
        assert f.name == f"{min(ids)}.batch.jsonl" and 1 <= len(ids) <= 3
        assert f.stat().st_size <= 1500 or len(ids) == 1
        held += ids
    assert sorted(held) == sorted(j.id for j in jobs)
    # 7 small envelopes (~250 bytes) in threes, the 7th beside the first big one (~1,150),
    # then the other two big ones a file each: by bytes
    assert sorted(len(f.read_text().splitlines()) for f in files) == [1, 1, 2, 3, 3]
