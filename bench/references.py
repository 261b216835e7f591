"""The references run-slot is compared with: the same bodies, headers and signatures as awty
sends, posted without awty's bookkeeping, by a bare asyncio + httptools client and by a
``requests.Session`` pool (what most Python schedulers do)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import threading
import time

from .common import PATH, SECRET, new_loop


def signed_request_parts(job, attempt, port: int, version: str):
    """Body and headers exactly as awty sends them (callback_body + Standard Webhooks)."""
    from awty.executors.http import callback_body

    body = callback_body(job, attempt)
    ts = int(time.time())
    msg_id = f"{job.id}_{attempt.check}"
    mac = hmac.new(SECRET, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    headers = {"Content-Type": "application/json", "User-Agent": f"awty/{version}",
               "webhook-id": msg_id, "webhook-timestamp": str(ts),
               "webhook-signature": "v1," + base64.b64encode(mac).decode(),
               "X-Awty-Job-Id": job.id, "X-Awty-Check": str(attempt.check),
               "X-Awty-Attempt": str(attempt.attempt)}
    return body, headers


def bare_reference(jobs: list, attempt, port: int, concurrency: int) -> tuple[float, int]:
    """asyncio (uvloop when available) + httptools, keep-alive, ``concurrency`` connections,
    request built per job (body, signature) inside the timed section. Returns (seconds, ok)."""
    import httptools

    from awty import __version__

    head0 = (f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
             f"Content-Type: application/json\r\nUser-Agent: awty/{__version__}\r\n")
    from awty.executors.http import callback_body

    def request(job) -> bytes:
        body = callback_body(job, attempt)
        ts = int(time.time())
        msg_id = f"{job.id}_{attempt.check}"
        mac = hmac.new(SECRET, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
        return (f"{head0}Content-Length: {len(body)}\r\nwebhook-id: {msg_id}\r\n"
                f"webhook-timestamp: {ts}\r\nwebhook-signature: v1,"
                f"{base64.b64encode(mac).decode()}\r\nX-Awty-Job-Id: {job.id}\r\n"
                f"X-Awty-Check: {attempt.check}\r\n"
                f"X-Awty-Attempt: {attempt.attempt}\r\n\r\n").encode() + body

    class Conn(asyncio.Protocol):
        def __init__(self):
            self.parser = httptools.HttpResponseParser(self)
            self.fut = None
            self.status = 0

        def connection_made(self, transport):
            self.t = transport

        def data_received(self, data):
            self.parser.feed_data(data)

        def on_message_complete(self):
            self.status = self.parser.get_status_code()
            self.fut.set_result(None)

        def connection_lost(self, exc):
            if self.fut is not None and not self.fut.done():
                self.fut.set_exception(ConnectionError("connection lost"))

    async def main() -> int:
        loop = asyncio.get_running_loop()
        it = iter(jobs)

        async def worker() -> int:
            _, c = await loop.create_connection(Conn, "127.0.0.1", port)
            ok = 0
            for job in it:
                c.fut = loop.create_future()
                c.t.write(request(job))
                await c.fut
                ok += 200 <= c.status < 300
            c.t.close()
            return ok

        return sum(await asyncio.gather(*(worker() for _ in range(concurrency))))

    loop = new_loop()
    try:
        t0 = time.perf_counter()
        ok = loop.run_until_complete(main())
        return time.perf_counter() - t0, ok
    finally:
        loop.close()


def requests_reference(jobs: list, attempt, port: int, threads: int) -> tuple[float, int]:
    """What most Python schedulers do: a thread pool, one requests.Session per thread."""
    import concurrent.futures

    import requests

    from awty import __version__

    url = f"http://127.0.0.1:{port}{PATH}"
    local = threading.local()

    def post(job) -> bool:
        s = getattr(local, "s", None)
        if s is None:
            s = local.s = requests.Session()
        body, headers = signed_request_parts(job, attempt, port, __version__)
        r = s.post(url, data=body, headers=headers, timeout=30)
        return 200 <= r.status_code < 300

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        ok = sum(ex.map(post, jobs))
    return time.perf_counter() - t0, ok


def bare_sqlite_insert(db, rows: list[tuple]) -> float:
    """The floor under ``add_many``: these rows (``future_job`` rows exactly as awty stored
    them) inserted into the same schema by a minimal script: one connection with the store's
    journal settings (WAL, synchronous NORMAL), one transaction, ``executemany``. No
    validation, no ids, no envelopes. Returns seconds, connect and close included.

    A minimal script never imported awty, so it binds without the adapters awty registers
    in the sqlite3 module (store/sqlite_rows: None, bool and the enums at a dict hit, which
    speeds any executemany of rows full of NULLs ~1.3-1.6x): they are set aside while it
    runs, or the floor would move with awty's own work (2026-11-26: 0.44x -> 0.25x)."""
    import sqlite3

    awtys = sqlite3.adapters.copy()
    for key in [k for k in sqlite3.adapters if k[0].__module__ != "datetime"]:
        del sqlite3.adapters[key]
    try:
        t0 = time.perf_counter()
        conn = sqlite3.connect(str(db), isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO future_job VALUES ({', '.join('?' * len(rows[0]))})",
                         rows)
        conn.execute("COMMIT")
        conn.close()
        return time.perf_counter() - t0
    finally:
        sqlite3.adapters.clear()
        sqlite3.adapters.update(awtys)
