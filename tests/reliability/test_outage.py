"""An outage run gives up within ``database_connect_timeout`` plus a little (issue 28, item 9).

PostgreSQL goes out of reach in the middle of a run (a TCP relay on 127.0.0.1 in front of the
test's own cluster, cut while the receiver is taking the slot's callbacks), two ways:

- ``reset``: the runner's connections are reset and new ones get no answer (a failover, a host
  gone). Before, each store call still to make (results, releases) waited for the pool in
  turn: 30 s after the cut with the default 5 s connect timeout, the line naming the pool's
  wait. Now the first connection error opens one connection to ask whether the server is
  there; unreachable, every call fails at once.
- ``silent``: the connections stay open and nothing answers (a frozen host, a partition that
  TCP does not report for minutes). Before, the run waited for ever (killed at 300 s here).
  Now a statement waiting a second makes the store ask the same question, and an unreachable
  server has the waiting statements' sockets shut.

Either way: exit 1, one line saying "unreachable", at most 10 s after the cut. Once the server
is back, a later ``catchup`` sends what the cut run left, each job once."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import pytest

from awty.api import Awty
from awty.clock import FixedClock
from awty.slots import slot_id
from awty.testing.receiver import Receiver
from helpers import T0
from relkit import cli_env, lease_passes, run_cli, wait_until

pytestmark = [pytest.mark.reliability, pytest.mark.slow]
N = 2000


def _advisory_locks(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        return c.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                         ).fetchone()[0]


@pytest.fixture
def own_cluster():
    import pgserver

    yield from pgserver.own_cluster()


@pytest.mark.slow
@pytest.mark.parametrize("process", ["auto", "on"], ids=["auto", "process"])
@pytest.mark.parametrize("reset", [True, False], ids=["reset", "silent"])
def test_an_outage_run_gives_up_within_ten_seconds(home, own_cluster, reset, process):
    """``process``: the default ("auto", which on PostgreSQL starts no store process: the
    run's own store finds the outage), and a store process started at once, up at the cut:
    the outage is then found in the store process, and its parent's own store, which unlocks
    the session at the run's end, learns it from there."""
    from pgrelay import Relay

    relay = Relay(str(own_cluster.socket / ".s.PGSQL.5432"))
    via_relay = f"postgresql://postgres@127.0.0.1:{relay.port}/postgres"
    cut_at: list[float] = []

    def cut_once(req) -> None:
        if req.n == N // 5 and not cut_at:
            cut_at.append(time.monotonic())
            relay.cut(reset=reset)

    try:
        with Receiver(delay=0.002, keep=False, on_request=cut_once) as rx:
            kw = {"database_url": own_cluster.url, "database_schema": "awty"}
            with Awty(home, clock=FixedClock(T0), env={}, **kw) as a:
                a.init()
                added = a.add_many([{"target": rx.url("/r"), "in": "1m"} for _ in range(N)])
            ids, slot = [r.job.id for r in added], added[0].job.next_check_at
            env = {**cli_env(home, slot + timedelta(seconds=1), concurrency=32,
                             store_process=process),
                   "AWTY_DATABASE_URL": via_relay}
            assert "AWTY_DATABASE_CONNECT_TIMEOUT" not in env  # the default: 5 s
            run = run_cli(["run-slot", slot_id(slot)], env, timeout=120)
            assert cut_at, "the receiver never saw the cut's request"
            gave_up = time.monotonic() - cut_at[0]
            assert run.returncode == 1, run.stderr[-2000:]
            assert gave_up <= 10, f"gave up {gave_up:.1f} s after the cut: {run.stderr[-500:]}"
            lines = run.stderr.strip().splitlines()
            assert len(lines) == 1 and "unreachable" in lines[0], run.stderr[-2000:]

            # The server back within reach: the cut run's sessions, which a silent cut kept
            # open on the server, end (in a real partition its keepalives end them), and with
            # them the run's advisory locks; its claims' leases end on the server's clock.
            relay.close()
            assert wait_until(lambda: _advisory_locks(own_cluster.url) == 0, 30)
            lease_passes(kw)
            later = {**cli_env(home, slot + timedelta(hours=1), concurrency=32),
                     "AWTY_DATABASE_URL": own_cluster.url}
            caught = run_cli(["catchup"], later, timeout=300)
            assert caught.returncode == 0, caught.stderr[-2000:]
            delivered = rx.counts()
    finally:
        relay.close()
    assert set(delivered) == set(ids)  # nothing lost
    with Awty(home, clock=FixedClock(T0), env={}, **kw) as a:
        assert a.count() == 0
        hist = Counter(h.id for h in a.history(limit=N + 100))
    assert set(hist) == set(ids) and max(hist.values()) == 1
    print(f"\n[pg/outage/{'reset' if reset else 'silent'}/{process}] gave up {gave_up:.1f} s "
          "after the cut; "
          f"sent twice {sum(c - 1 for c in delivered.values())}")


def test_a_run_ending_after_an_outage_does_not_wait_to_unlock(home, own_cluster):
    """The owner session's unlock at a run's end is skipped while the last word on the server
    is "unreachable", even once that word is old enough to be asked again: a silent server
    would make it wait a whole probe (1 s, then the connect timeout). Seen: an outage run on a
    loaded machine reached its end more than a connect timeout after the probe, and gave up
    19.9 s after the cut instead of ~7."""
    from pgrelay import Relay

    from awty.errors import StoreError
    from awty.store import open as open_store
    from awty.store.spec import StoreSpec

    with Awty(home, clock=FixedClock(T0), env={}, database_url=own_cluster.url,
              database_schema="awty") as a:
        a.init()
    relay = Relay(str(own_cluster.socket / ".s.PGSQL.5432"))
    via_relay = f"postgresql://postgres@127.0.0.1:{relay.port}/postgres"
    store = open_store(StoreSpec("postgres", via_relay, "awty", connect_timeout=2))
    try:
        with store.owner_session("r-1"):
            relay.cut(reset=False)
            t0 = time.monotonic()
            with pytest.raises(StoreError, match="unreachable"):
                store.count()
            probed = time.monotonic() - t0
            time.sleep(probed)  # the "known down" window is over: the next call would ask
            ending = time.monotonic()
        ended = time.monotonic() - ending
    finally:
        store.close()
        relay.close()
    assert ended < 0.5, f"the session's end waited {ended:.1f} s on a silent server"


def test_a_call_waiting_for_the_pool_ends_with_the_probe(home, own_cluster):
    """A call waiting for a pooled connection (every one taken: a run's claims and results
    on threads of their own, serve's requests) ends once the watch's probe finds the server out
    of reach, saying so, rather than at the pool's timeout (5 s here) and a probe of its own
    after it (6 s)."""
    import threading

    from pgrelay import Relay

    from awty.errors import Unreachable
    from awty.store import open as open_store
    from awty.store.spec import StoreSpec

    with Awty(home, clock=FixedClock(T0), env={}, database_url=own_cluster.url,
              database_schema="awty") as a:
        a.init()
    relay = Relay(str(own_cluster.socket / ".s.PGSQL.5432"))
    via_relay = f"postgresql://postgres@127.0.0.1:{relay.port}/postgres"
    store = open_store(StoreSpec("postgres", via_relay, "awty", connect_timeout=1, pool_size=1))
    taken, held = threading.Event(), []

    def hold() -> None:  # the pool's one connection, under a statement the cut leaves waiting
        try:
            with store._tx("hold") as cur:
                taken.set()
                cur.execute("SELECT pg_sleep(30)")
        except Exception as e:  # noqa: BLE001 - the watch shuts its socket
            held.append(e)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(10)
        relay.cut(reset=False)
        t0 = time.monotonic()
        with pytest.raises(Unreachable, match="cannot count: unreachable"):
            store.count()
        waited = time.monotonic() - t0
        holder.join(10)
        assert held and "unreachable" in str(held[0])
    finally:
        store.close()
        relay.close()
    assert waited < 4, f"the pool's wait ended {waited:.1f} s after the cut"


@pytest.mark.parametrize("cut", [None, "silent", "reset"])
def test_the_relay_ends_its_threads_quietly_on_close(monkeypatch, cut):
    """pgrelay: once ``close()`` returns no thread of the relay runs, and none raised (a pump
    once raised "ValueError: Invalid file descriptor: -1" on a socket closed under it)."""
    import socket
    import threading

    from pgrelay import Relay

    raised: list = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    before = set(threading.enumerate())
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        relay = Relay(upstream.getsockname())
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as c:
            c.sendall(b"x")
            up, _ = upstream.accept()
            with up:
                up.settimeout(5)
                assert up.recv(1) == b"x"  # a pump is running
                if cut:
                    relay.cut(reset=cut == "reset")
                relay.close()
                assert [t for t in threading.enumerate() if t not in before] == []
    # a pump handed sockets already closed (by cut(reset=True) as it began) ends quietly
    a, b = socket.socketpair()
    a.close()
    with b:
        relay._pump(a, b)
    assert raised == []
