"""The ``http`` executor's wire: one HTTP/1.1 client connection (a bare ``asyncio.Protocol``
whose responses httptools, uvicorn's C parser, reads), and the state the executor keeps per host
(``_Pool``: connections, turns, breaker, resolved addresses, proxy), per attempt (``_Try``) and
per target URL (``_Target``, or ``_BadTarget`` for one no request can go to). Nothing here
decides what an answer means (``http_answers``) or when a request goes out (``http``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import httptools

from ..model import Attempt, Job
from .base import Answered
from .breaker import Breaker
from .proxy import Proxy

# httptools keeps a header's value whole until it ends: bound the header block (and a stream of
# interim 1xx responses), or a receiver sending one endless header grows memory without limit.
MAX_HEAD_BYTES = 256 * 1024


class _Closed(Exception):
    """The connection ended before a response's headers arrived."""

    def __init__(self, got_bytes: bool, exc: BaseException | None):
        self.got_bytes = got_bytes
        self.exc = exc
        super().__init__(_describe_lost(got_bytes, exc))


class _BadResponse(Exception):
    pass


def _describe_lost(got_bytes: bool, exc: BaseException | None) -> str:
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    if exc is not None:
        return f"connection lost ({_oserror_text(exc)})"
    if got_bytes:
        return "connection closed in the middle of the response headers"
    return "connection closed before a response"


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 client connection: one request at a time, its response parsed by httptools.
    ``send`` writes a request; the answer (or why there is none) comes back through
    ``on_answer(conn, error)`` exactly once, from a callback of the loop: no future and no
    task per request."""

    __slots__ = ("transport", "parser", "pending", "closed", "got_bytes", "headers_done",
                 "status", "retry_after", "chunks", "size", "cap", "truncated", "keep_alive",
                 "head_size", "on_lost", "on_answer", "pool", "current")

    def __init__(self, cap: int, on_lost: Callable[[_Conn], None],
                 on_answer: Callable[[_Conn, BaseException | None], None]):
        # set by connection_made, which asyncio calls before any other method of the protocol;
        # the executor holds a connection only once create_connection returned it
        self.transport: asyncio.Transport
        self.parser = httptools.HttpResponseParser(self)
        self.pending = False  # a request was written and its answer is awaited
        self.closed = False
        self.cap = cap
        self.on_lost = on_lost
        self.on_answer = on_answer
        self.pool: _Pool | None = None
        self.current: _Try | None = None  # the attempt whose request is on this connection
        self._reset()

    def _reset(self) -> None:
        self.got_bytes = False
        self.head_size = 0
        self.headers_done = False
        self.status = 0
        self.retry_after: bytes | None = None
        self.chunks: list[bytes] = []
        self.size = 0
        self.truncated = False
        self.keep_alive = False

    def _answer(self, error: BaseException | None) -> None:
        if self.pending:
            self.pending = False
            self.on_answer(self, error)

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a TCP connection's transport (asyncio.Protocol's signature names the base class)
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.pending:
            # Bytes nobody asked for (or the tail of a response we stopped reading): this
            # connection's framing can no longer be trusted.
            self.closed = True
            self.transport.abort()
            return
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(_BadResponse("unexpected protocol upgrade"))
        except httptools.HttpParserError as e:
            self._fail(_BadResponse(f"malformed HTTP response ({e})"))
        if not self.headers_done and self.pending:
            self.head_size += len(data)
            if self.head_size > MAX_HEAD_BYTES:
                self._fail(_BadResponse(f"response headers over {MAX_HEAD_BYTES} bytes"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.on_lost(self)
        if self.pending:
            if self.headers_done:  # a body delimited by the connection's end, or cut short
                self.keep_alive = False
                self._answer(None)
            else:
                self._answer(_Closed(self.got_bytes, exc))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 11 and name.lower() == b"retry-after":
            self.retry_after = value

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        if self.truncated:
            return
        room = self.cap - self.size
        if len(body) > room:
            if room > 0:
                self.chunks.append(body[:room])
            self.size = self.cap
            self.truncated = True
            self.keep_alive = False
            self._answer(None)
            return
        self.chunks.append(body)
        self.size += len(body)

    def on_message_complete(self) -> None:
        status = self.status
        if 100 <= status < 200 and status != 101:  # an interim response: the real one follows
            self.headers_done = False
            self.status = 0
            self.retry_after = None
            return
        if self.truncated:
            return
        self.keep_alive = self.parser.should_keep_alive()
        self._answer(None)

    # client side
    def _fail(self, exc: BaseException) -> None:
        self.closed = True
        self.transport.abort()
        self._answer(exc)

    def expect(self) -> None:
        """A request is about to be written: its answer is what comes next."""
        self._reset()
        self.pending = True

    def expire(self) -> None:
        """The attempt's deadline passed while its answer was awaited."""
        if self.pending:
            self._fail(TimeoutError())

    def body(self) -> bytes:
        c = self.chunks
        return c[0] if len(c) == 1 else b"".join(c)

    def abort(self) -> None:
        self.closed = True
        self.transport.abort()


# --- per host and per target state -----------------------------------------------------------
class _Pool:
    """One host's connections, its turns (at most ``limit`` attempts at once) and its state.
    An attempt without a turn waits in ``backlog``; a finished attempt hands its turn straight
    to the next one there, whose request goes out in the same callback."""

    __slots__ = ("key", "host", "port", "tls", "sni", "idle", "limit", "active", "backlog",
                 "breaker", "addrs", "refusal", "dns_error", "resolving", "proxy", "pinned",
                 "live", "first")

    def __init__(self, key: tuple[str, str, int], host: str, sni: str, limit: int,
                 proxy: Proxy | None = None):
        self.key = key
        self.host = host  # for messages: the host as the URL names it
        self.port = key[2]
        self.tls = key[0] == "https"
        self.sni = sni
        self.idle: list[_Conn] = []
        self.limit = limit
        self.active = 0  # attempts holding a turn (connecting, or awaiting an answer)
        self.backlog: deque[_Try] = deque()
        self.breaker = Breaker()
        self.proxy = proxy
        self.addrs: list[tuple[int, tuple[Any, ...]]] | None = None
        self.refusal: str | None = None
        self.dns_error: str | None = None
        self.resolving: asyncio.Task[None] | None = None
        # Through a proxy, the checked address the proxy is asked for (``ip:port``): never the
        # name, which the proxy would resolve by itself (see ``_pin``)
        self.pinned: str | None = None
        self.live = 0  # connections made and not yet lost
        # With no connection live, one is opened alone and its request sent before the others
        # open (``HttpExecutor._open_and_send``): done once it is sent, or could not be made
        self.first: asyncio.Future[None] | None = None


class _Try:
    """One attempt of one job, from ``submit`` to its answer."""

    __slots__ = ("job", "attempt", "target", "done", "t0", "deadline", "request", "reused")

    def __init__(self, job: Job, attempt: Attempt, t: _Target, done: Answered):
        self.job = job
        self.attempt = attempt
        self.target = t
        self.done = done
        self.t0 = 0.0  # monotonic, when its turn came (its duration counts from there)
        self.deadline = 0.0  # the loop's clock (``HttpExecutor._expire_due`` watches it)
        self.request = b""  # its bytes, once its turn came
        self.reused = False  # sent on a pooled connection (a stale one is retried once)


class _Target:
    """A URL requests can go to: its host's pool, the request's first lines, its endpoint."""

    __slots__ = ("pool", "head", "path", "endpoint")
    error = None  # the discriminant shared with _BadTarget

    def __init__(self, pool: _Pool, head: str, path: str, endpoint: Breaker):
        self.pool = pool
        self.head = head  # request line + Host + the fixed headers
        self.path = path  # the endpoint's path (no query), for its breaker and messages
        self.endpoint = endpoint  # the endpoint's breaker


class _BadTarget:
    """A URL no request goes to: every attempt of it ends at once with ``error``."""

    __slots__ = ("error", "retry")

    def __init__(self, error: str, retry: bool = False):
        self.error = error
        self.retry = retry  # the error is the operator's setting (a proxy): fixed, jobs go on


def _oserror_text(e: BaseException) -> str:
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {e.verify_message or e.reason}"
    if isinstance(e, ssl.SSLError):
        return f"TLS error: {e.reason or e}"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower() if e.strerror[:1].isupper() else e.strerror
    return str(e) or type(e).__name__
