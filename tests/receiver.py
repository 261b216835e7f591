"""A scriptable HTTP/1.1 test receiver on 127.0.0.1 (threaded, stdlib only).

    from tests.receiver import Receiver, Reply

    with Receiver() as rx:
        rx.script("/a", status=[500, 200])              # 500 first, then 200 from then on
        rx.script("/b", status=202, headers={"Retry-After": "120"})
        rx.script("/c", Reply(status=503), Reply(status=200, json={"recheck_in": "1h"}))
        url = rx.url("/a")
        ...                                             # fire callbacks at url
        rx.requests("/a")                               # -> [Request(...), ...]
        rx.connections                                  # TCP connections accepted so far

Every path answers 200 with an empty body until scripted. A script matches the path without
its query string. A sequence of replies is served in order and its last reply repeats.
Behaviours a ``Reply`` can script (all keyword arguments of ``script`` too):

- ``status``, ``headers`` (e.g. Retry-After, Location), ``body`` (bytes or str) or ``json``
- ``delay``: seconds to wait before answering
- ``hang``: read the request, never answer (until the receiver stops)
- ``trickle``: seconds between bytes; the body is sent one byte at a time
- ``close``: close the connection without answering
- ``close_after``: answer, then close the connection (without a ``Connection: close`` header)
- ``close_if_reused``: drop, unanswered, a request arriving on a connection that already served
  one (a server that timed out an idle keep-alive connection)
- ``body_size``: a body of that many bytes (``b"x" * n``, written in chunks)

Every request is recorded (thread-safely) before it is answered: method, path (with query),
headers (dict, lower-case keys), body bytes, arrival time (``time.time()``) and the number of
the connection it came on (1-based, in accept order).
"""

from __future__ import annotations

import json as _json
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Receiver", "Reply", "Request", "free_port"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer. See the module docstring for what each field does."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | str = b""
    json: Any = None
    delay: float = 0.0
    hang: bool = False
    trickle: float | None = None
    close: bool = False
    close_after: bool = False
    close_if_reused: bool = False
    body_size: int | None = None

    def payload(self) -> bytes:
        if self.json is not None:
            return _json.dumps(self.json).encode()
        if isinstance(self.body, str):
            return self.body.encode()
        return bytes(self.body)


@dataclass(frozen=True)
class Request:
    """A request as received."""

    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes
    at: float  # time.time() on arrival
    connection: int  # which accepted connection carried it (1-based)
    raw_headers: list[tuple[str, str]] = field(default_factory=list)  # as sent, in order

    def json(self) -> Any:
        return _json.loads(self.body)


def free_port() -> int:
    """A TCP port on 127.0.0.1 with nothing listening (connecting to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, rx: Receiver):
        self.rx = rx
        super().__init__(("127.0.0.1", rx._port), _Handler)

    def get_request(self):
        sock, addr = super().get_request()
        self.rx._accepted(sock)
        return sock, addr

    def handle_error(self, request, client_address):  # quiet: clients hang up on purpose
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # an idle keep-alive connection is closed after this
    server: _Server

    def setup(self) -> None:
        self.conn_no = self.server.rx._conn_no(self.request)
        ctx = self.server.rx._tls
        if ctx is not None:
            self.request.settimeout(self.timeout)
            try:
                self.request = ctx.wrap_socket(self.request, server_side=True)
            except (ssl.SSLError, OSError):
                self.request.close()
                raise
            self.server.rx._replace_socket(self.request)
        super().setup()
        self.served = 0

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        self._serve()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_POST

    def _serve(self) -> None:
        rx = self.server.rx
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        reused = self.served > 0
        self.served += 1
        bare = self.path.split("?", 1)[0]
        raw = [(k, v) for k, v in self.headers.items()]
        rx._record(Request(self.command, self.path, {k.lower(): v for k, v in raw}, body,
                           time.time(), self.conn_no, raw))
        reply = rx._next_reply(bare)
        stop = rx._stop
        if reply.close or (reply.close_if_reused and reused):
            self.close_connection = True
            return
        if reply.hang:
            stop.wait()
            self.close_connection = True
            return
        if reply.delay and stop.wait(reply.delay):
            self.close_connection = True
            return
        try:
            self._answer(reply, stop)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return
        if reply.close_after:
            self.close_connection = True

    def _answer(self, reply: Reply, stop: threading.Event) -> None:
        payload = reply.payload()
        size = reply.body_size if reply.body_size is not None else len(payload)
        self.send_response(reply.status)
        names = {k.lower() for k in reply.headers}
        for k, v in reply.headers.items():
            self.send_header(k, v)
        if reply.json is not None and "content-type" not in names:
            self.send_header("Content-Type", "application/json")
        if "content-length" not in names and reply.status not in (204, 304) \
                and not 100 <= reply.status < 200:
            self.send_header("Content-Length", str(size))
        self.end_headers()
        if self.command == "HEAD" or reply.status in (204, 304):
            return
        w = self.wfile
        if reply.body_size is not None:
            chunk = b"x" * 65536
            left = reply.body_size
            while left > 0 and not stop.is_set():
                w.write(chunk[:min(left, len(chunk))])
                left -= len(chunk)
            return
        if reply.trickle is not None:
            w.flush()
            for i in range(len(payload)):
                if stop.wait(reply.trickle):
                    raise ConnectionResetError
                w.write(payload[i:i + 1])
                w.flush()
            return
        w.write(payload)


class Receiver:
    """A scriptable, recording HTTP/1.1 (keep-alive) server on 127.0.0.1; a context manager.
    ``Receiver(port=0)`` picks a free port; ``rx.url(path)`` is where it listens.
    ``Receiver(tls=(certfile, keyfile))`` serves HTTPS instead."""

    def __init__(self, port: int = 0, tls: tuple[str, str] | None = None):
        self._port = port
        self._tls: ssl.SSLContext | None = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self._lock = threading.Lock()
        self._scripts: dict[str, list[Reply]] = {}
        self._served: dict[str, int] = {}
        self._requests: list[Request] = []
        self._sockets: list[socket.socket] = []
        self._accepts = 0
        self._conn_ids: dict[int, int] = {}
        self._stop = threading.Event()
        self._cond = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- life -------------------------------------------------------------------------------
    def start(self) -> Receiver:
        self._server = _Server(self)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.01},
                                        name=f"receiver:{self._port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: hanging and trickling answers end, open connections are closed."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._lock:
            socks, self._sockets = self._sockets, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- script -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    def url(self, path: str = "/") -> str:
        if not path.startswith("/"):
            path = "/" + path
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self._port}{path}"

    def script(self, path: str, *replies: Reply, status: int | Iterable[int] = 200,
               **kw: Any) -> None:
        """Script the answers for ``path``: either ``Reply`` objects served in order, or the
        keyword form, where ``status`` may be a sequence (``[500, 200]``) sharing the other
        keywords. The last reply repeats. Re-scripting a path restarts its sequence."""
        if replies:
            if kw or status != 200:
                raise TypeError("give Reply objects or keywords, not both")
            seq = list(replies)
        else:
            statuses = [status] if isinstance(status, int) else list(status)
            if not statuses:
                raise ValueError("status: at least one")
            seq = [Reply(status=s, **kw) for s in statuses]
        with self._lock:
            self._scripts[path] = seq
            self._served[path] = 0

    def reset(self) -> None:
        """Forget the scripts and the recorded requests (connections stay as they are)."""
        with self._lock:
            self._scripts.clear()
            self._served.clear()
            self._requests.clear()

    # -- what happened ----------------------------------------------------------------------
    def requests(self, path: str | None = None) -> list[Request]:
        """Recorded requests in arrival order; only those for ``path`` (query ignored) if
        given."""
        with self._lock:
            reqs = list(self._requests)
        if path is None:
            return reqs
        return [r for r in reqs if r.path.split("?", 1)[0] == path]

    def wait_for(self, count: int, path: str | None = None, timeout: float = 5.0
                 ) -> list[Request]:
        """Block until at least ``count`` requests (for ``path``) arrived, or ``timeout``
        passed; returns the requests either way."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                reqs = [r for r in self._requests
                        if path is None or r.path.split("?", 1)[0] == path]
                left = deadline - time.monotonic()
                if len(reqs) >= count or left <= 0:
                    return reqs
                self._cond.wait(left)

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        with self._lock:
            return self._accepts

    # -- internals (server threads) -----------------------------------------------------------
    def _accepted(self, sock: socket.socket) -> None:
        with self._lock:
            self._accepts += 1
            self._conn_ids[id(sock)] = self._accepts
            self._sockets.append(sock)
            if len(self._sockets) > 4096:
                self._sockets = [s for s in self._sockets if s.fileno() != -1]

    def _replace_socket(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _conn_no(self, sock: socket.socket) -> int:
        with self._lock:
            return self._conn_ids.pop(id(sock), 0)

    def _record(self, req: Request) -> None:
        with self._cond:
            self._requests.append(req)
            self._cond.notify_all()

    def _next_reply(self, path: str) -> Reply:
        with self._lock:
            seq = self._scripts.get(path)
            if not seq:
                return Reply()
            i = self._served[path]
            self._served[path] = i + 1
            return seq[min(i, len(seq) - 1)]
