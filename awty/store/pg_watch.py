"""A watch over a PostgreSQL store's statements, for the outage TCP does not report: a frozen
server host, or a partition behind which the connection stays open. A statement sent there
waits for its answer for minutes (the kernel's retransmissions, no keepalive while a reply is
awaited), and a run with it. Once a statement has waited ``PROBE_AFTER`` seconds the watch asks
whether the server is still there (``probe``: a new connection within the connect timeout,
the store's ``_unreachable``); if not, it shuts the socket of every statement waiting, and each
fails at once with a connection error. A slow statement on a live server is left alone (the
probe succeeds; asked again at most once a connect timeout)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .pg_sql import PROBE_AFTER

TICK = 0.25


class Watch:
    def __init__(self, probe: Callable[[], str | None], every: float):
        self._probe, self._every = probe, every
        self._waiting: dict[object, tuple[Any, float]] = {}  # caller -> (connection, since)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._asked = 0.0

    @contextmanager
    def statement(self, conn: Any) -> Iterator[None]:
        """While ``conn`` (a psycopg connection) runs the caller's statements; ``conn`` None
        while the caller waits for a connection to run them on (the pool's): a long wait makes
        the watch ask as a long statement does, and the caller reads the answer (nothing to
        shut)."""
        key = object()  # one per caller: several wait for the pool at once
        with self._lock:
            self._waiting[key] = (conn, time.monotonic())
            self._start()
        try:
            yield
        finally:
            with self._lock:
                self._waiting.pop(key, None)

    def close(self) -> None:
        self._stop.set()

    def _start(self) -> None:  # under ``_lock``
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="awty-pg-watch")
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            now = time.monotonic()
            with self._lock:
                stuck = [c for c, since in self._waiting.values() if now - since >= PROBE_AFTER]
            if not stuck or now - self._asked < self._every:
                continue
            self._asked = now
            if self._probe() is None:
                continue
            with self._lock:
                stuck = [c for c, _ in self._waiting.values() if c is not None]
            for conn in stuck:
                _shut(conn)


def _shut(conn: Any) -> None:
    """Shut ``conn``'s socket under the thread waiting on it: its wait ends with an EOF, which
    psycopg reports as a lost connection. A duplicate descriptor, so the connection's own is
    closed by its owner only."""
    try:
        fd = os.dup(conn.pgconn.socket)
    except Exception:  # noqa: BLE001 - closed meanwhile: nothing to shut
        return
    s = socket.socket(fileno=fd)
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()
