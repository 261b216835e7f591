"""The receiver's server side: HTTP/1.1 on asyncio + httptools (the parser awty's own client
uses), on 127.0.0.1 only, stopped by its owner or by itself after a lifetime.

``Server`` runs an event loop on a thread of its own and hands each complete request to a
``sink`` (the ``Receiver``): ``sink.receive(method, url, headers, body, connection)`` records
it and returns the answer to give, an object with ``Reply``'s fields. This module knows how to
give an answer (late, never, a byte at a time, 50 MB of it, then close...), nothing about
what was asked.

``serve_constant`` is the load receiver: one answer for every request, nothing recorded, on
uvloop when installed, in the calling thread (the bench runs two such processes on one port).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import threading
import time
from http import HTTPStatus
from typing import Any, cast

import httptools

_CHUNK = b"x" * 65536  # a body_size answer is written in chunks of this, as the socket drains


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Clients hang up on purpose here (timeouts, refused certificates): say nothing of it."""
    if isinstance(context.get("exception"), OSError):
        return
    loop.default_exception_handler(context)


class _Conn(asyncio.Protocol):
    """One connection: parse requests, answer each in order (a later answer waits for the one
    before it, so that a pipelining client gets them in request order)."""

    def __init__(self, server: Server):
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.number = 0  # which accepted connection this is (1-based)
        self.served = 0
        self.last: asyncio.Future[None] | None = None
        self.room = asyncio.Event()  # cleared while the transport's write buffer is full
        self.url = b""
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []

    # -- asyncio ------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio.Protocol's names a BaseTransport; a TCP server's is always a Transport
        tcp = self.transport = cast(asyncio.Transport, transport)
        self.number = self.server.opened(tcp)
        self.room.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.transports.discard(self.transport)
        self.transport = None
        self.room.set()  # a writer waiting for room finds the connection gone

    def pause_writing(self) -> None:
        self.room.clear()

    def resume_writing(self) -> None:
        self.room.set()

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self._close()  # not HTTP, or a switch of protocol (not something awty asks for)

    # -- httptools ----------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.url, self.headers, self.body = b"", [], []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.parser.should_upgrade():
            return  # refused: the connection is closed once the parser stops (see above)
        reused = self.served > 0
        self.served += 1
        method = self.parser.get_method().decode("latin-1")
        reply = self.server.sink.receive(method, self.url.decode("latin-1"), self.headers,
                                         b"".join(self.body), self.number)
        keep = self.parser.should_keep_alive()
        self.last = asyncio.ensure_future(self._respond(reply, method, keep, reused, self.last))

    # -- answering ----------------------------------------------------------------------------
    def _open(self) -> asyncio.Transport | None:
        t = self.transport
        return None if t is None or t.is_closing() else t

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def _respond(self, reply: Any, method: str, keep: bool, reused: bool,
                       before: asyncio.Future[None] | None) -> None:
        if before is not None:
            await before
        if reply.close or (reply.close_if_reused and reused):
            self._close()
            return
        if reply.hang:
            await asyncio.get_running_loop().create_future()  # until the receiver stops
        if reply.delay:
            await asyncio.sleep(reply.delay)
        t = self._open()
        if t is None:
            return
        payload = reply.payload()
        try:
            head, closes = _head(reply, len(payload), keep)
        except UnicodeEncodeError:  # a scripted header that HTTP cannot carry
            self._close()
            return
        t.write(head)
        if method != "HEAD" and reply.status not in (204, 304):
            if reply.body_size is not None:
                await self._stream(reply.body_size)
            elif reply.trickle is not None:
                await self._trickle(payload, reply.trickle)
            else:
                t.write(payload)
        if closes or reply.close_after:
            self._close()

    async def _stream(self, size: int) -> None:
        left = size
        while left > 0:
            await self.room.wait()
            t = self._open()
            if t is None:
                return
            t.write(_CHUNK[:min(left, len(_CHUNK))])
            left -= len(_CHUNK)

    async def _trickle(self, payload: bytes, seconds: float) -> None:
        for i in range(len(payload)):
            await asyncio.sleep(seconds)
            t = self._open()
            if t is None:
                return
            t.write(payload[i:i + 1])


def _head(reply: Any, length: int, keep: bool) -> tuple[bytes, bool]:
    """The status line and headers; and whether the connection closes after this answer."""
    status = reply.status
    lines = [f"HTTP/1.1 {status} {_reason(status)}"]
    names = set()
    closes = not keep
    for k, v in reply.headers.items():
        lines.append(f"{k}: {v}")
        names.add(k.lower())
        if k.lower() == "connection" and v.lower() == "close":
            closes = True
    if reply.json is not None and "content-type" not in names:
        lines.append("Content-Type: application/json")
    if "content-length" not in names and status not in (204, 304) and not 100 <= status < 200:
        lines.append(f"Content-Length: {length if reply.body_size is None else reply.body_size}")
    if not keep and "connection" not in names:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), closes


class Server:
    """The event loop thread behind a ``Receiver``."""

    def __init__(self, sink: Any, port: int, tls: ssl.SSLContext | None,
                 lifetime: float | None):
        self.sink = sink
        self.port = port
        self.tls = tls
        self.lifetime = lifetime
        self.accepted = 0
        self.transports: set[asyncio.Transport] = set()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def opened(self, transport: asyncio.Transport) -> int:
        self.transports.add(transport)
        self.accepted += 1
        return self.accepted

    def start(self) -> None:
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                       name="awty-test-receiver")
        self.thread.start()
        if not ready.wait(10) or self.error is not None:
            raise RuntimeError(f"the test receiver did not start: {self.error!r}")

    def _run(self, ready: threading.Event) -> None:
        loop = self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.set_exception_handler(_quiet)
        try:
            server = loop.run_until_complete(loop.create_server(
                lambda: _Conn(self), "127.0.0.1", self.port, ssl=self.tls, backlog=2048))
            self.port = server.sockets[0].getsockname()[1]
        except BaseException as e:  # reported by start()
            self.error = e
            ready.set()
            loop.close()
            return
        ready.set()
        if self.lifetime is not None:  # stops by itself, whatever its owner does
            loop.call_later(self.lifetime, loop.stop)
        try:
            loop.run_forever()
        finally:
            server.close()
            for t in list(self.transports):
                t.abort()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(server.wait_closed())
            loop.close()

    def stop(self) -> None:
        """Stop serving: hanging and trickling answers end, open connections are closed."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # closed meanwhile (its lifetime ran out)
                pass
        if self.thread is not None:
            self.thread.join(timeout=10)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def serve_constant(port: int, *, status: int = 204, reuse_port: bool = False,
                   parent: int | None = None, lifetime: float = 4 * 3600) -> None:
    """Answer every request on 127.0.0.1:``port`` with ``status`` and no body, keep-alive,
    until SIGTERM, ``lifetime`` seconds, or (given ``parent``) that process's end. As lean as
    an asyncio server gets (only ``on_message_complete`` is parsed for): a load receiver
    whose ceiling is far above what it is measuring. Several processes may share the port
    (``reuse_port``: SO_REUSEPORT)."""
    line = f"HTTP/1.1 {status} {_reason(status)}\r\nServer: awty-testing\r\n"
    length = "" if status in (204, 304) else "Content-Length: 0\r\n"
    answer = (line + length + "\r\n").encode()
    closing = (line + length + "Connection: close\r\n\r\n").encode()

    class Constant(asyncio.Protocol):
        __slots__ = ("transport", "parser")

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            # a TCP server's transport (asyncio.Protocol's signature names the base class)
            self.transport = cast(asyncio.Transport, transport)
            self.parser = httptools.HttpRequestParser(self)

        def data_received(self, data: bytes) -> None:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                self.transport.close()

        def on_message_complete(self) -> None:
            if self.parser.should_keep_alive():
                self.transport.write(answer)
            else:
                self.transport.write(closing)
                self.transport.close()

    loop = _new_loop()
    asyncio.set_event_loop(loop)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    loop.run_until_complete(loop.create_server(Constant, sock=sock, backlog=4096))
    deadline = time.monotonic() + lifetime

    def watchdog() -> None:  # self-stopping: parent gone or too old
        if (parent is not None and os.getppid() != parent) or time.monotonic() > deadline:
            loop.stop()
        else:
            loop.call_later(1.0, watchdog)

    loop.call_soon(watchdog)
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    try:
        loop.run_forever()
    finally:
        loop.close()


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()
