"""A scriptable, recording HTTP/1.1 receiver for awty's callbacks, on 127.0.0.1 only: the one
the tests, the reliability suite, the bench and the demo use, and a way to try callbacks
locally (``python -m awty.testing.receiver --help``).

    from awty.testing.receiver import Receiver, Reply

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
- ``body_size``: a body of that many bytes (``b"x" * n``, written as the client reads it)

Answers may also be computed: ``Receiver(reply=fn)`` calls ``fn(request)`` for every path not
scripted; it returns a status, a ``(status, headers, body)`` tuple or a ``Reply``.
``on_request(request)`` runs first (e.g. to SIGKILL a runner at the n-th request, or to move a
test clock mid-run) and ``on_reply(request, reply)`` after the answer is chosen. They run on
the receiver's event loop thread: keep them quick. An exception in one is kept in ``errors``
and answered 500. ``delay`` seconds are added to every answer.

Every request is recorded before it is answered: ``requests()`` keeps each ``Request``
(method, path with query, headers, body, arrival time, connection, arrival number);
``log()`` and ``counts()`` keep a short line per request and the deliveries per job
(``X-Awty-Job-Id``). For volume (tens of thousands of callbacks), ``keep=False`` keeps only those.
Memory is bounded by ``max_requests``: beyond it requests are answered 503 and not recorded.
The receiver stops by itself after ``lifetime`` seconds (None: never), whatever its owner
does. A request asking to switch protocols (``Upgrade``) is refused: its connection is closed,
nothing kept.

The module is awty's test kit, shipped with it; nothing in awty itself imports it but the
``awty receiver`` command (``awty.cli.receiver``), which runs ``main``.
"""

from __future__ import annotations

import json as _json
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, NoReturn

from ..clock import SystemClock
from ._server import Server, serve_constant
from .messages import Logged, Reply, Request, as_int, as_reply, free_port, slot_of

SCRIPTED_LIFETIME = 600.0  # seconds: a receiver a script started and forgot stops by itself

__all__ = ["Receiver", "Reply", "Request", "Logged", "free_port", "serve_constant"]


_Answer = Callable[[Request], "int | tuple[Any, ...] | Reply"]


class Receiver:
    """A scriptable, recording HTTP/1.1 (keep-alive) server on 127.0.0.1; a context manager.
    ``Receiver(port=0)`` picks a free port; ``rx.url(path)`` is where it listens.
    ``Receiver(tls=(certfile, keyfile))`` serves HTTPS instead."""

    def __init__(self, port: int = 0, *, tls: tuple[str, str] | None = None,
                 reply: _Answer | None = None,
                 on_request: Callable[[Request], None] | None = None,
                 on_reply: Callable[[Request, Reply], None] | None = None,
                 delay: float = 0.0, keep: bool = True, lifetime: float | None = 600.0,
                 max_requests: int = 2_000_000):
        context = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
        self.reply = reply
        self.on_request = on_request
        self.on_reply = on_reply
        self.delay = delay
        self.keep = keep
        self.max_requests = max_requests
        self.errors: list[BaseException] = []  # raised by reply / on_request / on_reply
        self._server = Server(self, port, context, lifetime)
        self._tls = context is not None
        self._cond = threading.Condition()
        self._scripts: dict[str, list[Reply]] = {}
        self._served: dict[str, int] = {}
        self._requests: list[Request] = []
        self._log: list[Logged] = []
        self._counts: dict[str, int] = {}

    # -- life -------------------------------------------------------------------------------
    def start(self) -> Receiver:
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving: hanging and trickling answers end, open connections are closed."""
        self._server.stop()

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server.running

    # -- script -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.port

    def url(self, path: str = "/") -> str:
        if not path.startswith("/"):
            path = "/" + path
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}{path}"

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
        with self._cond:
            self._scripts[path] = seq
            self._served[path] = 0

    def reset(self) -> None:
        """Forget the scripts and what was received (connections stay as they are)."""
        with self._cond:
            self._scripts.clear()
            self._served.clear()
            self._requests.clear()
            self._log.clear()
            self._counts.clear()

    # -- what happened ----------------------------------------------------------------------
    def requests(self, path: str | None = None) -> list[Request]:
        """Recorded requests in arrival order; only those for ``path`` (query ignored) if
        given. Empty with ``keep=False``."""
        with self._cond:
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
    def total(self) -> int:
        """Requests recorded so far."""
        with self._cond:
            return len(self._log)

    def wait_total(self, n: int, timeout: float) -> int:
        """Block until ``n`` requests were recorded or ``timeout`` passed; returns the total."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._log) < n and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            return len(self._log)

    def counts(self) -> dict[str, int]:
        """Requests received per ``X-Awty-Job-Id`` (deliveries per job)."""
        with self._cond:
            return dict(self._counts)

    def log(self) -> list[Logged]:
        """(path, job id, attempt, slot) of every request, in arrival order."""
        with self._cond:
            return list(self._log)

    @property
    def connections(self) -> int:
        """TCP connections accepted so far."""
        return self._server.accepted

    # -- the server's side (its event loop thread) -------------------------------------------
    def receive(self, method: str, url: str, raw: list[tuple[str, str]], body: bytes,
                connection: int) -> Reply:
        """Record one request and choose its answer."""
        headers = {k.lower(): v for k, v in raw}
        path = url.split("?", 1)[0]
        at = SystemClock().now().timestamp()
        job_id = headers.get("x-awty-job-id")
        line = Logged(path, job_id, as_int(headers.get("x-awty-attempt")), slot_of(body))
        scripted: Reply | None = None
        with self._cond:
            if len(self._log) >= self.max_requests:
                return Reply(status=503)
            self._log.append(line)
            if job_id is not None:
                self._counts[job_id] = self._counts.get(job_id, 0) + 1
            req = Request(method, url, headers, body, at, connection, raw, len(self._log))
            if self.keep:
                self._requests.append(req)
            self._cond.notify_all()
            seq = self._scripts.get(path)
            if seq:
                i = self._served[path]
                self._served[path] = i + 1
                scripted = seq[min(i, len(seq) - 1)]
        try:
            if self.on_request is not None:
                self.on_request(req)
            reply = scripted or (as_reply(self.reply(req)) if self.reply else Reply())
            if self.on_reply is not None:
                self.on_reply(req, reply)
        except Exception as e:  # the test's own hook failed: say so rather than hang
            self.errors.append(e)
            return Reply(status=500, body=f"test receiver hook failed: {e!r}")
        return replace(reply, delay=reply.delay + self.delay) if self.delay else reply


# --- awty receiver / python -m awty.testing.receiver ----------------------------------------
def main(argv: list[str] | None = None, prog: str = "python -m awty.testing.receiver") -> None:
    """Serve on 127.0.0.1 and print each callback with the answer given (see --help). Started
    from a terminal it runs until stopped; from a script it stops by itself after
    ``--lifetime`` (600 s): a forgotten background receiver does not hold its port forever."""
    import argparse
    import signal
    import sys

    class Parser(argparse.ArgumentParser):
        def format_usage(self) -> str:
            return super().format_usage().replace("usage: ", "Usage: ", 1)

        def format_help(self) -> str:
            return super().format_help().replace("usage: ", "Usage: ", 1)

        def error(self, message: str) -> NoReturn:
            # one line, as every awty command says a bad input
            self.exit(2, f"{self.prog}: {message}  (see --help)\n")

    p = Parser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A receiver for awty's callbacks on 127.0.0.1: prints each one (job, check, "
                    "attempt, payload, signature) with the answer it gave. From a terminal it "
                    "runs until Ctrl-C; started by a script, it stops by itself after "
                    "--lifetime seconds (600).",
        epilog=f"example (in a second terminal):\n  {prog} --port 8080 --answer /flaky=500 "
               "--answer /flaky=204 \\\n      --secret \"$AWTY_SIGNING_SECRET\"\n"
               "  awty add http://127.0.0.1:8080/flaky --in 1m")
    p.add_argument("--port", type=int, default=0, help="default: a free one")
    p.add_argument("--port-file", help="write the port here once listening")
    p.add_argument("--lifetime", type=float, default=None,
                   help="seconds before it stops itself (default: until Ctrl-C from a "
                        "terminal, else 600)")
    p.add_argument("--answer", action="append", default=[], metavar="PATH=STATUS[ BODY]",
                   help="answer PATH with STATUS (and BODY, JSON or text); repeat a PATH for "
                        "a sequence whose last answer repeats. Others get 200.")
    p.add_argument("--secret", help="check each callback's signature with this whsec_ secret")
    p.add_argument("--quiet", action="store_true", help="print nothing per request")
    p.add_argument("--constant", type=int, metavar="STATUS", help="load mode: answer STATUS "
                   "to everything, record and print nothing (needs --port)")
    p.add_argument("--reuse-port", action="store_true", help="with --constant: SO_REUSEPORT")
    p.add_argument("--parent", type=int, help="with --constant: stop when this process ends")
    a = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if a.constant is not None:
        if not a.port:
            p.error("--constant needs --port")
        serve_constant(a.port, status=a.constant, reuse_port=a.reuse_port, parent=a.parent,
                       lifetime=600 if a.lifetime is None else a.lifetime)
        return
    lifetime = a.lifetime if a.lifetime is not None else \
        None if sys.stdin.isatty() else SCRIPTED_LIFETIME
    try:
        answers = _answers(a.answer)
    except ValueError as e:
        p.error(f"--answer {e}")

    def show(req: Request, reply: Reply) -> None:
        print(_describe(req, reply, a.secret), flush=True)

    with Receiver(a.port, on_reply=None if a.quiet else show, lifetime=lifetime) as rx:
        for path, replies in answers.items():
            rx.script(path, *replies)
        # Ctrl-C may come as soon as "listening" is out: the line is written inside the try
        try:
            if a.port_file:
                _write_port(a.port_file, rx.port)
            else:
                until = "until Ctrl-C" if lifetime is None else \
                    f"stops by itself after {lifetime:g}s (--lifetime)"
                print(f"listening on {rx.url()}: {until}", file=sys.stderr, flush=True)
            while rx.running:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass


def _answers(specs: list[str]) -> dict[str, list[Reply]]:
    """``/path=STATUS[ BODY]`` options -> each path's sequence of replies."""
    answers: dict[str, list[Reply]] = {}
    for spec in specs:
        path, sep, rest = spec.partition("=")
        status, _, body = rest.strip().partition(" ")
        if not sep or not path.startswith("/") or not status.isdigit():
            raise ValueError(f"{spec!r}: expected /PATH=STATUS or /PATH=STATUS BODY")
        try:
            doc = _json.loads(body) if body else None
        except ValueError:
            doc = None
        reply = Reply(status=int(status), json=doc) if doc is not None else \
            Reply(status=int(status), body=body)
        answers.setdefault(path, []).append(reply)
    return answers


def _describe(req: Request, reply: Reply, secret: str | None) -> str:
    """One line per callback: which job, check and attempt, its payload, its signature."""
    try:
        doc = req.json()
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("id"), str):
        what = (f"job {doc['id'][:10]}… check {doc.get('check')} attempt {doc.get('attempt')} "
                f"payload {_json.dumps(doc.get('payload'))}")
    else:
        what = f"{req.method} {len(req.body)} bytes"
    sig = ""
    if secret:
        problem = req.signature_error(secret)
        sig = " [signed ok]" if problem is None else f" [BAD SIG: {problem}]"
    return f"  receiver <- {req.path:9} {what}{sig} -> {reply.status}"


def _write_port(path: str, port: int) -> None:
    """Whole or not at all: a script polling for the file never reads half a number."""
    import os

    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
