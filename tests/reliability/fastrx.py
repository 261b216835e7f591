"""A fast, recording HTTP/1.1 receiver for the reliability tests (asyncio + httptools).

The threaded ``tests/receiver.py`` is the scriptable one; this one is for volume (tens of
thousands of callbacks a second on loopback) and for fault injection at an exact request:

    with FastRx(reply=lambda r: 500 if flaky(r) else 204, on_request=hook) as rx:
        url = rx.url("/load")
        ...
        rx.counts()          # {webhook-id: requests received}
        rx.log()             # [(path, webhook-id, attempt, slot), ...] in arrival order

- It binds 127.0.0.1 only, on a free port, and stops by itself after ``lifetime`` seconds.
- ``reply(req)`` returns a status, or ``(status, headers, body)``; it runs on the server's
  event loop, so keep it quick. ``req`` is a ``Seen`` (path, job_id, attempt, slot, n).
- ``on_request(req)`` runs before the reply is chosen (e.g. to SIGKILL the runner at the n-th
  request, or to move a test clock mid-run).
- ``delay`` seconds are awaited before each answer (slows a runner down without threads).
- Memory is bounded by ``max_requests``: beyond it requests are answered 503 and not recorded.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httptools

__all__ = ["FastRx", "Seen"]

_REASONS = {200: "OK", 202: "Accepted", 204: "No Content", 410: "Gone", 500: "Server Error",
            503: "Service Unavailable"}


@dataclass(frozen=True, slots=True)
class Seen:
    path: str
    job_id: str | None
    attempt: int | None
    slot: str | None
    n: int  # 1-based arrival number


class _Proto(asyncio.Protocol):
    def __init__(self, rx: FastRx):
        self.rx = rx
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.last: asyncio.Future | None = None  # answers leave in request order

    # asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.rx._transports.add(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.rx._transports.discard(self.transport)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.close()

    # httptools
    def on_message_begin(self) -> None:
        self.url, self.headers, self.body = b"", {}, []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        keep = self.parser.should_keep_alive()
        task = asyncio.ensure_future(self._answer(self.url, self.headers, b"".join(self.body),
                                                  keep, self.last))
        self.last = task

    async def _answer(self, url: bytes, headers: dict, body: bytes, keep: bool,
                      before: asyncio.Future | None) -> None:
        rx = self.rx
        seen = rx._record(url, headers, body)
        if seen is None:
            out: Any = 503
        else:
            if rx.on_request is not None:
                rx.on_request(seen)
            out = rx.reply(seen) if rx.reply is not None else 200
            if rx.delay:
                await asyncio.sleep(rx.delay)
        if before is not None:
            await before
        status, extra, payload = (out, {}, b"") if isinstance(out, int) else out
        if isinstance(payload, str):
            payload = payload.encode()
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'X')}"]
        head += [f"{k}: {v}" for k, v in extra.items()]
        if status != 204:
            head.append(f"Content-Length: {len(payload)}")
        if not keep:
            head.append("Connection: close")
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
        if not keep:
            self.transport.close()


class FastRx:
    def __init__(self, reply: Callable[[Seen], Any] | None = None, *,
                 on_request: Callable[[Seen], None] | None = None, delay: float = 0.0,
                 lifetime: float = 600.0, max_requests: int = 2_000_000):
        self.reply = reply
        self.on_request = on_request
        self.delay = delay
        self.lifetime = lifetime
        self.max_requests = max_requests
        self.port = 0
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._log: list[tuple[str, str | None, int | None, str | None]] = []
        self._transports: set = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- life ---------------------------------------------------------------------------
    def start(self) -> FastRx:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True,
                                        name="fastrx")
        self._thread.start()
        if not ready.wait(10) or self._error is not None:
            raise RuntimeError(f"fastrx did not start: {self._error!r}")
        return self

    def _serve(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            server = loop.run_until_complete(loop.create_server(
                lambda: _Proto(self), "127.0.0.1", 0, backlog=2048))
            self.port = server.sockets[0].getsockname()[1]
        except BaseException as e:  # pragma: no cover - reported by start()
            self._error = e
            ready.set()
            return
        ready.set()
        loop.call_later(self.lifetime, loop.stop)  # stops by itself, whatever the test does
        try:
            loop.run_forever()
        finally:
            server.close()
            for t in list(self._transports):
                t.abort()
            tasks = asyncio.all_tasks(loop)
            for t in tasks:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(server.wait_closed())
            loop.close()

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> FastRx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path if path.startswith('/') else '/' + path}"

    # -- what happened ----------------------------------------------------------------------
    def _record(self, url: bytes, headers: dict, body: bytes) -> Seen | None:
        path = url.decode("latin-1").split("?", 1)[0]
        jid = headers.get(b"webhook-id")
        job_id = jid.decode() if jid else None
        att = headers.get(b"x-awty-attempt")
        slot = None
        if body[:1] == b"{":
            try:
                slot = json.loads(body).get("slot")
            except ValueError:
                pass
        with self._lock:
            if len(self._log) >= self.max_requests:
                return None
            self._log.append((path, job_id, int(att) if att else None, slot))
            if job_id is not None:
                self._counts[job_id] = self._counts.get(job_id, 0) + 1
            n = len(self._log)
        return Seen(path, job_id, int(att) if att else None, slot, n)

    @property
    def total(self) -> int:
        with self._lock:
            return len(self._log)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def log(self) -> list[tuple[str, str | None, int | None, str | None]]:
        with self._lock:
            return list(self._log)

    def wait_total(self, n: int, timeout: float) -> int:
        """Poll (briefly) until ``n`` requests arrived or ``timeout`` passed."""
        import time

        deadline = time.monotonic() + timeout
        while self.total < n and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.total
