"""One ``awty add`` on PostgreSQL through libpq without psycopg (issue 34 #5,
``awty/store/pg_light.py``): the row it stores is the row the real store stores, and whatever
it is not sure of (a missing schema, a refused connection, a statement the server refuses)
ends as the real store ends it, in the same words. A server that never answers is told once,
within the connect timeout (not waited out twice), and one that stops answering under the
insert is found out as ``pg_watch`` finds it for the real store."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from awty import store
from awty.api import Awty
from awty.clock import FixedClock
from awty.errors import Conflict, StoreError
from awty.store.pg_light import LightStore
from helpers import T0, pg_url
from pgrelay import Relay


@pytest.fixture
def pg(pg_database, pg_schema):
    """A fresh schema of the session database: (libpq URL, awty's URL, schema)."""
    store.open(store.StoreSpec("postgres", pg_database.url, pg_schema), mode="init").close()
    return pg_database.url, pg_url(pg_database.url), pg_schema


def _rows(url: str, schema: str) -> list[dict]:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, row_factory=dict_row) as c:
        return c.execute(f'SELECT * FROM "{schema}".future_job ORDER BY created_at, id'
                         ).fetchall()


def _open_both(url: str, schema: str, **kw) -> tuple[str, str]:
    """The one-line error of opening ``url`` one-shot (the light path) and pooled."""
    out = []
    for one_shot in (True, False):
        with pytest.raises(StoreError) as e:
            store.open(store.StoreSpec("postgres", url, schema, **kw), one_shot=one_shot)
        out.append(str(e.value))
    return out[0], out[1]


def test_a_light_add_stores_the_row_the_real_store_stores(pg, home, tmp_path):
    url, awty_url, schema = pg
    kw = {"database_url": awty_url, "database_schema": schema}
    fields = dict(in_="2h", payload={"order": 42, "note": "é ✓ \\ \t"},
                  entity="order", key="42", headers=["X-A: 1", "X-B: two"], max_checks=3,
                  horizon="3d", timeout="2.5s", max_attempts=4, misfire_grace="90s",
                  cwd=str(tmp_path))
    with Awty(home, clock=FixedClock(T0), env={}, one_shot=True, **kw) as a:
        assert isinstance(a.store, LightStore)
        light = a.add("https://example.com/hook?a=1&b=ü", **fields).job
        exec_ = a.add("echo 'it''s' \"x\"", kind="exec", in_="1h", cwd=str(tmp_path)).job
    with Awty(home, clock=FixedClock(T0), env={}, **kw) as a:
        real = a.add("https://example.com/hook?a=1&b=ü", **fields).job
        real_exec = a.add("echo 'it''s' \"x\"", kind="exec", in_="1h", cwd=str(tmp_path)).job
        assert a.get(light.id).job == light
    by_id = {r["id"]: r for r in _rows(url, schema)}
    for mine, theirs in ((light, real), (exec_, real_exec)):
        a_row, b_row = dict(by_id[mine.id]), dict(by_id[theirs.id])
        for row in (a_row, b_row):
            row.pop("id"), row.pop("shard_key")
        assert a_row == b_row


def test_what_the_light_path_is_not_sure_of_ends_in_the_real_stores_words(pg, tmp_path):
    url, _, schema = pg
    light, pooled = _open_both(url, f"none_{uuid.uuid4().hex[:8]}")
    assert light == pooled and "run `awty init`" in light
    with socket.socket() as s:  # a port nothing listens on: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    light, pooled = _open_both(f"postgresql://postgres@127.0.0.1:{port}/test", schema)
    assert light == pooled and f"127.0.0.1:{port}/test: cannot open the store" in light
    # a statement the server refuses (an id already stored): nothing stored, the real store's
    # error
    s = store.open(store.StoreSpec("postgres", url, schema), one_shot=True)
    try:
        assert isinstance(s, LightStore)
        with Awty(tmp_path / "h", clock=FixedClock(T0), env={}, database_url=pg_url(url),
                  database_schema=schema) as a:
            job = a.add("https://example.com/x", in_="1h").job
        with pytest.raises(Conflict) as e:
            s.add([job], [None])
        assert str(e.value) == "cannot add: a job with one of these ids already exists"
    finally:
        s.close()
    assert len(_rows(url, schema)) == 1


@pytest.mark.slow
def test_a_server_that_never_answers_is_told_once_within_the_timeout(pg):
    """A listener that takes the connection and says nothing (a host gone behind a proxy):
    the light path says what psycopg says, after one connect timeout, not two."""
    _, _, schema = pg
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        port = srv.getsockname()[1]
        url = f"postgresql://postgres@127.0.0.1:{port}/test"
        t0 = time.monotonic()
        with pytest.raises(StoreError) as e:
            store.open(store.StoreSpec("postgres", url, schema, connect_timeout=2),
                       one_shot=True)
        took = time.monotonic() - t0
        light = str(e.value)
        with pytest.raises(StoreError) as e:
            store.open(store.StoreSpec("postgres", url, schema, connect_timeout=2))
    assert light == str(e.value) == (f"PostgreSQL at 127.0.0.1:{port}/test: cannot open the "
                                     "store: connection timeout expired")
    assert 1.9 <= took < 3.5


@pytest.mark.slow
def test_a_server_that_stops_answering_under_the_insert_is_found_out(pg, tmp_path):
    url, _, schema = pg
    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(url)
    host, port = d.get("host", ""), d.get("port") or "5432"
    relay = Relay(f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, int(port)))
    try:
        via = f"postgresql://{d.get('user', 'postgres')}@127.0.0.1:{relay.port}/{d['dbname']}"
        with Awty(tmp_path / "h", clock=FixedClock(T0), env={}, one_shot=True,
                  database_url=via, database_schema=schema,
                  database_connect_timeout=2) as a:
            assert isinstance(a.store, LightStore)
            relay.cut()
            t0 = time.monotonic()
            with pytest.raises(StoreError) as e:
                a.add("https://example.com/x", in_="1h")
            took = time.monotonic() - t0
    finally:
        relay.close()
    assert str(e.value) == (f"PostgreSQL at 127.0.0.1:{relay.port}/{d['dbname']}: cannot add: "
                            "unreachable (connection timeout expired)")
    assert took < 6
    assert _rows(url, schema) == []
