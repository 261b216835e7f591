"""A large batch is stored while it is validated (``Awty._streamed``, ``Store.add_chunks``:
PostgreSQL's COPY, SQLite's writer thread): what add_many promises holds as for any batch, on
both stores."""

from __future__ import annotations

import pytest

from awty import api
from awty.api import Awty
from awty.errors import Conflict, InvalidInput
from awty.model import run_order
from helpers import URL

CHUNK = 40


@pytest.fixture
def home_of(home, clock, backend, monkeypatch):
    monkeypatch.setattr(api, "_CHUNK", CHUNK)
    with Awty(home, clock=clock, env={}, **backend.kw) as a:
        a.init()
        chunked: list[int] = []
        add_chunks = getattr(a.store, "add_chunks", None)
        if add_chunks is not None:
            def spy(chunks):
                def each():
                    for c in chunks:
                        chunked.append(len(c[0]))
                        yield c
                return add_chunks(each())

            monkeypatch.setattr(a.store, "add_chunks", spy)
        yield a, chunked, backend.kind


def specs(n: int) -> list[dict]:
    return [{"target": URL, "in": f"{1 + i % 3}h", "payload": {"n": i}, "entity": "order",
             "key": str(i)} for i in range(n)]


def test_a_large_batch_is_stored_whole_in_its_order(home_of):
    a, chunked, kind = home_of
    batch = specs(3 * CHUNK + 7)
    added = a.add_many(batch)
    assert [r.job.payload_json for r in added] == [f'{{"n":{i}}}' for i in range(len(batch))]
    assert all(r.created for r in added)
    assert {j.id for j in a.list()} == {r.job.id for r in added}
    assert a.count() == len(batch)
    assert chunked == [CHUNK, CHUNK, CHUNK, 7]


@pytest.mark.parametrize("lines", [None, "given"])
def test_a_bad_spec_in_a_later_chunk_is_named_and_nothing_is_stored(home_of, lines):
    a, chunked, kind = home_of
    batch = specs(3 * CHUNK)
    bad = batch[2 * CHUNK + 5]
    bad["at"] = bad.pop("in")
    bad["at"] = "never"
    given = [10 + 2 * i for i in range(len(batch))] if lines else None
    line = given[2 * CHUNK + 5] if given else 2 * CHUNK + 6
    with pytest.raises(InvalidInput, match=f"^line {line}: at: not a time"):
        a.add_many(batch, lines=given)
    assert a.count() == 0
    assert chunked == [CHUNK, CHUNK]  # two chunks stored, then the transaction undone
    bad["in"] = bad.pop("at") and "1h"
    assert len(a.add_many(batch)) == a.count() == 3 * CHUNK


def test_a_batch_with_an_idempotency_key_is_looked_up_whole(home_of):
    a, chunked, _ = home_of
    batch = specs(3 * CHUNK)
    batch[5]["idempotency_key"] = batch[2 * CHUNK + 1]["idempotency_key"] = "k"
    batch[2 * CHUNK + 1]["payload"] = batch[5]["payload"]
    batch[2 * CHUNK + 1]["in"] = batch[5]["in"]
    batch[2 * CHUNK + 1]["key"] = batch[5]["key"]
    added = a.add_many(batch)
    assert added[2 * CHUNK + 1].job.id == added[5].job.id
    assert not added[2 * CHUNK + 1].created
    assert a.count() == 3 * CHUNK - 1
    assert chunked == []  # through Store.add


def test_add_chunks_takes_no_job_with_a_key_and_stores_nothing(home_of):
    a, _, _ = home_of
    jobs = a.add_many(specs(3), dry_run=True)
    keyed = jobs[2].job.replace(idempotency_key="k")
    with pytest.raises(ValueError, match="idempotency key"):
        a.store.add_chunks(iter([([jobs[0].job, jobs[1].job], [None, None]),
                                 ([keyed], ["fp"])]))
    assert a.count() == 0


def test_an_id_taken_in_a_later_chunk_stores_nothing(home_of):
    a, chunked, _ = home_of
    (first,) = a.add_many(specs(1))
    batch = specs(3 * CHUNK)
    batch[2 * CHUNK + 3]["id"] = first.job.id
    with pytest.raises(Conflict, match="already exists"):
        a.add_many(batch)
    assert chunked == [CHUNK, CHUNK, CHUNK]
    assert a.count() == 1


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_on_sqlite_each_chunk_goes_in_in_run_order(home_of):
    a, _, _ = home_of
    added = a.add_many(specs(2 * CHUNK))
    stored = [r[0] for r in a.store.conn.execute("SELECT id FROM future_job ORDER BY rowid")]
    for part in (added[:CHUNK], added[CHUNK:]):
        assert stored[:CHUNK] == [j.id for j in sorted((r.job for r in part), key=run_order)]
        stored = stored[CHUNK:]
    assert len({r.job.next_check_at for r in added[:CHUNK]}) == 3  # the order is a sort


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_on_postgresql_the_batch_streams_with_quick_thread_switches(home_of):
    """The COPY's writer thread gets the GIL within gcpause.SWITCH while the caller
    validates, and the program's interval is back after."""
    import sys

    from awty import gcpause

    a, _, _ = home_of
    seen: list[float] = []
    add_chunks = a.store.add_chunks

    def spy(chunks):
        def each():
            for c in chunks:
                seen.append(sys.getswitchinterval())
                yield c
        return add_chunks(each())

    a.store.add_chunks = spy
    before = sys.getswitchinterval()
    assert len(a.add_many(specs(3 * CHUNK))) == 3 * CHUNK
    assert seen == [pytest.approx(min(gcpause.SWITCH, before))] * 3
    assert sys.getswitchinterval() == before
