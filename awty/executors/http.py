"""The ``http`` executor: one signed JSON POST per check, built for throughput.

A bare ``asyncio.Protocol`` client with responses parsed by httptools (uvicorn's C parser; the
connection and the per-host state are in ``http_transport``), on whatever event loop is running
(the runner picks uvloop when it can; this module never installs a loop policy). Keep-alive
pools per (scheme, host, port), at most ``per_host_concurrency`` connections per host; a host
name is resolved once per executor and every address it resolves to is checked by
``netguard.address_refusal`` before the connection is made to that address, so there is no
DNS-rebinding window. Redirects are never followed.

Answers (SPEC 4; read into a Result by ``http_answers``): 2xx -> DONE, or RECHECK when the JSON
body has ``recheck_at``/``recheck_in`` or the status is 202 with ``Retry-After``; 410 -> GONE;
408/425/429/5xx, timeouts and connection errors -> RETRY (honouring ``Retry-After``); 3xx and
other 4xx -> FAIL.
Circuit breakers per host and per endpoint (``breaker``) defer the remaining jobs of a host or
an endpoint that keeps failing. HTTP(S) proxies come from the environment as curl reads them
(``proxy``); the target's name is resolved and checked here all the same, and the proxy is
given the checked address, never the name (``_pin``). A certificate that
fails verification is a permanent failure. ``run`` never raises for a job's failure.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import socket
import ssl
import time
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii as _json_str
from operator import itemgetter
from typing import Any, cast
from urllib.parse import quote, urlsplit

from .. import netguard, signing, wire
from .._version import __version__
from ..clock import Clock
from ..config import Settings
from ..errors import InvalidInput
from ..model import Answer, Attempt, Job, Result
from ..slots import iso
from .base import Answered
from .breaker import HOST_WIDE, Breaker
from .http_answers import result_of
from .http_transport import (_BadResponse, _BadTarget, _Closed, _Conn, _oserror_text, _Pool,
                             _Target, _Try)
from .proxy import Proxies, Proxy, ProxyError, open_tunnel

_VISIBLE = re.compile(r"[!-~]+")

_monotonic = time.monotonic


def callback_body(job: Job, attempt: Attempt) -> bytes:
    """The exact bytes POSTed for one attempt: compact JSON with the job's stored payload JSON
    embedded verbatim (not re-parsed)."""
    entity = "null" if job.entity_name is None else _json_str(job.entity_name)
    key = "null" if job.entity_key is None else _json_str(job.entity_key)
    return (f'{{"id":{_json_str(job.id)},"entity":{entity},"key":{key},'
            f'"payload":{job.payload_json or "null"},"check":{attempt.check:d},'
            f'"attempt":{attempt.attempt:d},"slot":{_json_str(attempt.slot)},'
            f'"first_check_at":"{iso(job.first_check_at)}"{_occurrence(job)}}}').encode()


def _occurrence(job: Job) -> str:
    """A schedule's job names its schedule and nominal time in the body (the name is a plain
    word: ``recurrence.parse_name``); a ``schedule run`` has no nominal time (null)."""
    if job.schedule is None:
        return ""
    at = "null" if job.occurrence is None else f'"{iso(job.occurrence)}"'
    return f',"schedule":{_json_str(job.schedule)},"occurrence":{at}'


def _seconds_text(s: float) -> str:
    return f"{s:g}s"


def _ascii_host(sockaddr: tuple[Any, ...]) -> tuple[Any, ...]:
    """An address with its host as bytes (ASCII: a name is IDNA-encoded in ``_parse_target``,
    an address is digits). Given text, uvloop encodes it with the ``idna`` codec, whose first
    use imports it (with unicodedata and stringprep): ~1 ms before a run's first callback."""
    return (sockaddr[0].encode("ascii"), *sockaddr[1:])


def _pin(addrs: list[tuple[int, tuple[Any, ...]]], port: int) -> str:
    """The address a proxy is sent to, as ``ip:port``: one of those the target's name resolved
    to here and netguard checked (IPv4 first: a proxy without IPv6 is common). Given the name,
    a proxy resolves it by itself, maybe differently (split-horizon DNS: a metadata address)."""
    ip = next((a[0] for f, a in addrs if f == socket.AF_INET), addrs[0][1][0])
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


# Stands for the checked address in a proxied http request line until it is known: a NUL,
# which no URL awty sends holds (add refuses them), and which the line reaches first.
_PINNED = "\x00"
_PINNED_BYTES = _PINNED.encode()


class _Unsendable(Exception):
    """The job's own data cannot be sent (``_request``): the attempt fails with this text."""


# --- the executor ----------------------------------------------------------------------------
class HttpExecutor:
    """Runs ``http`` jobs. Create it inside the event loop that will run it (or let it bind to
    the running loop on the first ``run``); call ``close`` once after the last ``run``."""

    def __init__(self, settings: Settings, clock: Clock,
                 secret: bytes | tuple[bytes, ...] | None,
                 user_agent: str = f"awty/{__version__}", env: Mapping[str, str] | None = None):
        self._settings = settings
        self._clock = clock
        # every callback carries one signature per secret (several while rotating)
        self._secrets = (secret,) if isinstance(secret, bytes) else tuple(secret or ())
        self._fixed = (f"Content-Type: application/json\r\nUser-Agent: {user_agent}\r\n")
        if wire.HEADER_VALUE_BAD.search(user_agent):
            raise ValueError("user_agent contains control characters")
        self._cap = max(0, int(settings.max_response_bytes))
        self._threshold = max(1, int(settings.breaker_threshold))
        self._per_host = max(1, int(settings.per_host_concurrency))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._targets: dict[str, _Target | _BadTarget] = {}
        self._pools: dict[tuple[str, str, int], _Pool] = {}
        self._endpoints: dict[tuple[tuple[str, str, int], str], Breaker] = {}
        self._proxies = Proxies.from_env(os.environ if env is None else env)
        self._conns: set[_Conn] = set()
        self._opening: set[asyncio.Task[None]] = set()  # attempts opening a connection
        self._outbox: list[tuple[_Conn, bytes]] = []  # requests to write at the turn's end
        # One timer for every request's deadline, armed at (or before) the earliest: a timer a
        # request, made and cancelled, cost ~1.5-2 µs of each callback (``_expire_due``)
        self._watch: asyncio.TimerHandle | None = None
        self._watch_at = math.inf
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    # -- public ---------------------------------------------------------------------------
    async def run(self, job: Job, attempt: Attempt) -> Result:
        """One attempt, awaited (``submit`` with a future)."""
        fut: asyncio.Future[Result] = self._bound().create_future()

        def done(outcome: Result | BaseException) -> None:
            if not fut.done():
                if isinstance(outcome, BaseException):
                    fut.set_exception(outcome)
                else:
                    fut.set_result(outcome)

        self.submit(job, attempt, done)
        return await fut

    def submit(self, job: Job, attempt: Attempt, done: Answered) -> None:
        """Start one attempt; ``done`` is called once with its answer, from a callback of the
        running loop (never from inside this call), or with the exception that broke this
        executor (a bug). Never raises for the job's own failure. The attempt waits for a turn
        of its host when ``per_host_concurrency`` of them are under way; its deadline counts
        from its turn."""
        loop = self._bound()
        t = self._targets.get(job.target)
        if t is None:
            t = self._target(job.target)
        if t.error is not None:
            loop.call_soon(done, Result(Answer.RETRY if t.retry else Answer.FAIL, error=t.error))
            return
        pool = t.pool
        if pool.breaker.open or t.endpoint.open:
            loop.call_soon(done, self._deferred(pool, t))
            return
        a = _Try(job, attempt, t, done)
        if pool.active < pool.limit:
            pool.active += 1
            result = self._begin(pool, a)
            if result is not None:
                self._release(pool)
                loop.call_soon(done, result)
        else:
            pool.backlog.append(a)

    def new_run(self) -> None:
        """Breakers closed and empty, names resolved (and checked by netguard) again: a catch-up's
        next slot is tried as a new executor would try it; the idle connections stay open."""
        for pool in self._pools.values():
            pool.breaker.reset()
            if pool.resolving is None or pool.resolving.done():
                pool.resolving = pool.addrs = pool.refusal = pool.dns_error = None
        for ep in self._endpoints.values():
            ep.reset()

    async def close(self) -> None:
        self._closed = True
        for pool in self._pools.values():
            if pool.resolving is not None and not pool.resolving.done():
                pool.resolving.cancel()
            pool.idle.clear()
        for task in list(self._opening):
            task.cancel()
        for conn in list(self._conns):
            conn.abort()
        self._conns.clear()
        self._disarm()
        await asyncio.sleep(0)  # let the transports finish closing their sockets

    # -- setup ----------------------------------------------------------------------------
    def _bound(self) -> asyncio.AbstractEventLoop:
        """The running loop, bound to. The loop bound last is the one running for as long as
        it runs (asyncio.get_running_loop costs a getpid() system call per call on Python
        3.11, which every callback would pay)."""
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = asyncio.get_running_loop()
            if loop is not self._loop:
                self._bind(loop)
        return loop

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """First use, or a new event loop: pooled state of another loop cannot be reused."""
        if self._loop is not None:
            for conn in list(self._conns):
                try:
                    conn.abort()
                except RuntimeError:  # its loop is closed already
                    pass
            self._conns.clear()
            try:
                self._disarm()
            except RuntimeError:  # its loop is closed already
                self._watch, self._watch_at = None, math.inf
            self._targets.clear()
            self._pools.clear()
            self._endpoints.clear()
        self._loop = loop

    def _target(self, url: str) -> _Target | _BadTarget:
        t = self._parse_target(url)
        if len(self._targets) >= 100_000:
            self._targets.clear()
        self._targets[url] = t
        return t

    def _parse_target(self, url: str) -> _Target | _BadTarget:
        try:
            netguard.check_url(url, self._settings)
        except InvalidInput as e:
            return _BadTarget(str(e))
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
        default = 443 if scheme == "https" else 80
        port = parts.port or default
        try:
            ascii_host = host if host.isascii() else host.encode("idna").decode("ascii")
        except UnicodeError:
            return _BadTarget(f"target {url!r}: the host name cannot be encoded (IDNA)")
        if ":" in ascii_host:  # an IPv6 literal
            ascii_host = ascii_host.split("%", 1)[0]
            host_header = f"[{ascii_host}]"
        else:
            host_header = ascii_host
        if parts.port is not None and parts.port != default:
            host_header += f":{port}"
        path = quote(parts.path or "/", safe="/%!$&'()*+,;=:@-._~")
        if parts.query:
            path += "?" + quote(parts.query, safe="/?%!$&'()*+,;=:@-._~")
        key = (scheme, ascii_host, port)
        pool = self._pools.get(key)
        if pool is None:
            proxy = self._proxies.for_target(scheme, ascii_host, port)
            pool = self._pools[key] = _Pool(key, host, ascii_host, self._per_host, proxy)
        if pool.proxy is not None and pool.proxy.error is not None:
            return _BadTarget(pool.proxy.error, retry=True)
        if pool.proxy is not None and not pool.tls:
            # a forward proxy takes the absolute form; https goes through a CONNECT tunnel.
            # The authority is the checked address, known once resolved: _send puts it in.
            line = f"POST {scheme}://{_PINNED}{path} HTTP/1.1\r\n{pool.proxy.auth_line}"
        else:
            line = f"POST {path} HTTP/1.1\r\n"
        ep_path = quote(parts.path or "/", safe="/%!$&'()*+,;=:@-._~")
        endpoint = self._endpoints.get((key, ep_path))
        if endpoint is None:
            endpoint = self._endpoints[(key, ep_path)] = Breaker()
        head = f"{line}Host: {host_header}\r\n{self._fixed}"
        return _Target(pool, head, ep_path, endpoint)

    def _deferred(self, pool: _Pool, t: _Target) -> Result:
        if pool.breaker.open:
            error = f"host {pool.host} unreachable: deferred (circuit open)"
        else:
            error = f"endpoint {pool.host}{t.path[:200]} failing: deferred (circuit open)"
        return Result(Answer.RETRY, deferred=True, error=error)

    def _failed(self, t: _Target, pool: _Pool) -> None:
        """A timeout or a connection dropped before an answer: the endpoint's failure, and the
        host's when other endpoints fail too (``breaker``)."""
        t.endpoint.failure(self._threshold, t.path)
        pool.breaker.failure(self._threshold, t.path, spread=True)

    def _answered(self, t: _Target, pool: _Pool) -> None:
        t.endpoint.success()
        pool.breaker.success()

    # -- one attempt ------------------------------------------------------------------------
    def _request(self, job: Job, attempt: Attempt, t: _Target) -> bytes:
        """The request bytes; ``_Unsendable`` when the job's own data cannot be sent."""
        if not _VISIBLE.fullmatch(job.id):
            raise _Unsendable(f"job id {job.id!r} cannot be sent in a header")
        try:
            body = callback_body(job, attempt)
        except UnicodeEncodeError:
            raise _Unsendable("the job's payload or entity cannot be encoded as UTF-8") from None
        ts = int(self._clock.now().timestamp())
        extra = ""
        if job.headers:
            lines = []
            for name, value in job.headers.items():
                if wire.is_reserved(str(name)):
                    continue  # stored before add refused it: never sent, it would break framing
                refusal = wire.header_refusal(name, value)
                if refusal is not None:
                    raise _Unsendable(f"header: {refusal[:200]}")
                lines.append(f"{name}: {value}\r\n")
            extra = "".join(lines)
        if job.schedule is not None:
            extra += f"X-Awty-Schedule: {job.schedule}\r\n"
        if job.occurrence is not None:
            extra += f"X-Awty-Occurrence: {iso(job.occurrence)}\r\n"
        msg_id = wire.message_id(job.id, attempt.check)
        if self._secrets:
            sig = f"webhook-signature: {signing.signatures(self._secrets, msg_id, ts, body)}\r\n"
        else:
            sig = ""
        head = (f"{t.head}Content-Length: {len(body)}\r\nwebhook-id: {msg_id}\r\n"
                f"webhook-timestamp: {ts}\r\n{sig}X-Awty-Job-Id: {job.id}\r\n"
                f"X-Awty-Check: {attempt.check:d}\r\n"
                f"X-Awty-Attempt: {attempt.attempt:d}\r\n{extra}\r\n")
        try:
            return head.encode() + body
        except UnicodeEncodeError:
            raise _Unsendable("a header of the job cannot be encoded as UTF-8") from None

    def _begin(self, pool: _Pool, a: _Try) -> Result | None:
        """``a`` has a turn of ``pool``: send its request (or start opening a connection for
        it). A Result when it ends at once, without using its turn."""
        t = a.target
        if pool.breaker.open or t.endpoint.open:
            return self._deferred(pool, t)  # opened while it waited its turn
        a.t0 = _monotonic()
        loop = self._loop
        assert loop is not None
        a.deadline = loop.time() + a.attempt.timeout
        try:
            a.request = self._request(a.job, a.attempt, t)
        except _Unsendable as e:
            return Result(Answer.FAIL, error=str(e), duration=_monotonic() - a.t0)
        idle = pool.idle
        while idle:
            conn = idle.pop()
            if conn.closed or conn.transport.is_closing():
                conn.abort()
                continue
            a.reused = True
            self._send(conn, pool, a)
            return None
        self._open(pool, a)
        return None

    def _send(self, conn: _Conn, pool: _Pool, a: _Try) -> None:
        loop = self._loop
        assert loop is not None
        conn.pool = pool
        conn.current = a
        if pool.proxy is not None and not pool.tls:  # the request line's address (_target)
            pinned = pool.pinned
            assert pinned is not None  # resolved before its first connection (_resolve)
            a.request = a.request.replace(_PINNED_BYTES, pinned.encode(), 1)
        if a.deadline < self._watch_at:
            self._arm(a.deadline)
        conn.expect()
        # Written with the others of this turn of the loop, once its callbacks are done: a
        # write wakes a receiver that went to sleep (~15 µs a write here), a batch wakes it
        # once. Requests written one at a time as each answer came cost twice as much.
        out = self._outbox
        out.append((conn, a.request))
        if len(out) == 1:
            loop.call_soon(self._write_out)

    def _arm(self, at: float) -> None:
        if self._watch is not None:
            self._watch.cancel()
        assert self._loop is not None
        self._watch = self._loop.call_at(at, self._expire_due)
        self._watch_at = at

    def _disarm(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self._watch, self._watch_at = None, math.inf

    def _expire_due(self) -> None:
        """The earliest deadline came: every request past its own is answered with a timeout
        (the earliest first, as their own timers fired), and the watch armed for the next.
        With one timeout for all, it fires about once a timeout, however many requests."""
        self._watch, self._watch_at = None, math.inf
        assert self._loop is not None
        # as a timer of its own would, a deadline within the loop clock's millisecond is due
        now = self._loop.time() + 0.001
        due: list[tuple[float, _Conn]] = []
        later = math.inf
        for conn in self._conns:
            a = conn.current
            if a is None or not conn.pending:
                continue
            if a.deadline <= now:
                due.append((a.deadline, conn))
            elif a.deadline < later:
                later = a.deadline
        due.sort(key=itemgetter(0))  # by deadline alone: two equal ones would compare _Conns
        for _, conn in due:
            conn.expire()  # may send the next request: its deadline arms the watch if sooner
        if later < self._watch_at:
            self._arm(later)

    def _write_out(self) -> None:
        out, self._outbox = self._outbox, []
        for conn, data in out:
            if conn.pending and not conn.closed:
                conn.transport.write(data)

    def _on_answer(self, conn: _Conn, error: BaseException | None) -> None:
        """The connection's answer to ``conn.current`` (or why there is none)."""
        a, pool = conn.current, conn.pool
        conn.current = None
        assert a is not None and pool is not None
        try:
            self._answered_on(conn, error, a, pool)
        except BaseException as e:  # a bug of ours: reported, never lost in the loop's log
            conn.abort()
            a.done(e)

    def _answered_on(self, conn: _Conn, error: BaseException | None, a: _Try,
                     pool: _Pool) -> None:
        t = a.target
        if error is None:
            if conn.keep_alive and not conn.closed and not conn.truncated and not self._closed:
                pool.idle.append(conn)
            else:
                conn.abort()
            self._answered(t, pool)
            result = result_of(conn.status, conn.body(), conn.retry_after, conn.truncated,
                               _monotonic() - a.t0, self._clock, self._cap)
        else:
            conn.abort()
            if isinstance(error, _Closed) and a.reused and not error.got_bytes:
                # A pooled connection the server had already closed: try once more on a
                # fresh one, as if nothing happened.
                a.reused = False
                self._open(pool, a)
                return
            if isinstance(error, _BadResponse):
                self._answered(t, pool)  # it answered something: the host is reachable
            else:
                self._failed(t, pool)
            result = Result(Answer.RETRY, error=self._error_text(error, a),
                            duration=_monotonic() - a.t0)
        self._release(pool)  # the next request goes out first, then this answer is reported
        a.done(result)

    @staticmethod
    def _error_text(error: BaseException, a: _Try) -> str:
        if isinstance(error, TimeoutError):
            return f"timeout after {_seconds_text(a.attempt.timeout)}"
        return str(error)

    def _release(self, pool: _Pool) -> None:
        """A turn of ``pool`` is free: the next attempt waiting takes it (one that ends at once
        is reported, and the turn goes on), else the pool has one turn less under way."""
        backlog = pool.backlog
        while backlog:
            a = backlog.popleft()
            result = self._begin(pool, a)
            if result is None:
                return
            a.done(result)
        pool.active -= 1

    def _open(self, pool: _Pool, a: _Try) -> None:
        loop = self._loop
        assert loop is not None
        task = loop.create_task(self._open_and_send(pool, a))
        self._opening.add(task)
        task.add_done_callback(self._opening.discard)

    async def _open_and_send(self, pool: _Pool, a: _Try) -> None:
        """A new connection for ``a`` (resolving, connecting, TLS, a proxy's tunnel: all
        within its deadline), then its request on it."""
        loop = self._loop
        assert loop is not None
        # A host with no connection: one is opened and its request sent before the others
        # open. Opened all at once (per_host_concurrency of them), the first request went out
        # only once every connect had been made (executor -> first request 8.7 ms, against
        # 4.2 with one connection a host).
        first = None
        if pool.live == 0 and pool.first is None:
            first = pool.first = loop.create_future()
        try:
            try:
                async with asyncio.timeout_at(a.deadline):
                    if first is None and pool.first is not None:
                        await asyncio.shield(pool.first)
                    got = await self._connect(pool, loop, a.t0)
            except TimeoutError:
                self._failed(a.target, pool)
                got = Result(Answer.RETRY, error=self._error_text(TimeoutError(), a),
                             duration=_monotonic() - a.t0)
            except asyncio.CancelledError:  # the executor is closing
                got = Result(Answer.RETRY, error="stopped before a connection was made",
                             duration=_monotonic() - a.t0)
            except BaseException as e:  # a bug of ours: reported, never lost in the loop's log
                self._release(pool)
                a.done(e)
                return
            if isinstance(got, Result):  # once per new connection, not per request
                self._release(pool)
                a.done(got)
                return
            self._send(got, pool, a)
        finally:
            if first is not None:  # the others open now (or try, if this one failed)
                pool.first = None
                first.set_result(None)

    async def _connect(self, pool: _Pool, loop: asyncio.AbstractEventLoop,
                       t0: float) -> _Conn | Result:
        if pool.addrs is None and pool.refusal is None and pool.dns_error is None:
            if pool.resolving is None:
                pool.resolving = loop.create_task(self._resolve(pool, loop))
            await asyncio.shield(pool.resolving)
        if pool.refusal is not None:
            return Result(Answer.FAIL, error=pool.refusal, duration=_monotonic() - t0)
        if pool.dns_error is not None:
            pool.breaker.failure(self._threshold, HOST_WIDE, spread=True)
            return Result(Answer.RETRY, error=pool.dns_error, duration=_monotonic() - t0)
        ctx = None
        if pool.tls:
            try:
                ctx = self._tls_context()
            except (OSError, ssl.SSLError) as e:  # an operator's setting: fixed, jobs go on
                return Result(Answer.RETRY, duration=_monotonic() - t0,
                              error=f"ca_file {self._settings.ca_file}: cannot load "
                                    f"({_oserror_text(e)})")
        proxy = pool.proxy
        if proxy is not None:
            try:
                addrs = await self._proxy_addrs(proxy, loop)
            except OSError as e:
                pool.breaker.failure(self._threshold, HOST_WIDE, spread=True)
                return Result(Answer.RETRY, duration=_monotonic() - t0,
                              error=f"cannot resolve proxy {proxy.host}: {_oserror_text(e)}")
        else:
            assert pool.addrs is not None  # resolved: neither refused nor a DNS error (above)
            addrs = pool.addrs
        last: BaseException | None = None
        for family, sockaddr in addrs:
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, _ascii_host(sockaddr))
                if proxy is not None and ctx is not None:
                    assert pool.pinned is not None  # resolved (above): _resolve pinned it
                    await open_tunnel(loop, sock, proxy, pool.pinned)
                _, conn = await loop.create_connection(
                    self._factory, sock=sock, ssl=ctx,
                    server_hostname=pool.sni if ctx is not None else None)
            except ssl.SSLCertVerificationError as e:
                # The name or the chain is wrong: no retry will make it right.
                sock.close()
                return Result(Answer.FAIL, error=_oserror_text(e), duration=_monotonic() - t0)
            except (OSError, ProxyError) as e:  # OSError includes ssl.SSLError
                sock.close()
                last = e
                if isinstance(e, ProxyError):
                    break  # the proxy answered: another address of it would answer the same
                continue
            except BaseException:
                sock.close()
                raise
            self._conns.add(conn)
            conn.pool = pool
            pool.live += 1
            return conn
        pool.breaker.failure(self._threshold, HOST_WIDE, spread=True)
        error = _oserror_text(last) if last else "no address to use"
        if proxy is not None and not isinstance(last, ProxyError):
            error = f"proxy {proxy.host}:{proxy.port}: {error}"
        return Result(Answer.RETRY, error=error, duration=_monotonic() - t0)

    def _tls_context(self) -> ssl.SSLContext:
        """The system's trust store (or SSL_CERT_FILE / SSL_CERT_DIR, as OpenSSL reads them),
        plus ``ca_file`` when set: a private CA is trusted beside the public ones."""
        ctx = self._ssl
        if ctx is None:
            ctx = ssl.create_default_context()
            if self._settings.ca_file:
                ctx.load_verify_locations(cafile=os.path.expanduser(self._settings.ca_file))
            self._ssl = ctx
        return ctx

    async def _proxy_addrs(self, proxy: Proxy, loop: asyncio.AbstractEventLoop
                           ) -> list[tuple[int, tuple[Any, ...]]]:
        """The proxy's addresses: the operator's choice, so not checked by netguard."""
        infos = await loop.getaddrinfo(proxy.host, proxy.port, type=socket.SOCK_STREAM,
                                       proto=socket.IPPROTO_TCP)
        return [(f, a) for f, _t, _p, _n, a in infos if f in (socket.AF_INET, socket.AF_INET6)]

    def _factory(self) -> _Conn:
        return _Conn(self._cap, self._lost, self._on_answer)

    def _lost(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        if conn.pool is not None:
            conn.pool.live -= 1

    async def _resolve(self, pool: _Pool, loop: asyncio.AbstractEventLoop) -> None:
        """Once per host per executor: resolve, and check every address before any is used
        (the name as bytes: ``_ascii_host``)."""
        try:
            infos = await loop.getaddrinfo(pool.sni.encode("ascii"), pool.port,
                                           type=socket.SOCK_STREAM,
                                           proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError, OSError) as e:
            detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            pool.dns_error = f"cannot resolve host {pool.host}: {detail}"
            return
        addrs: list[tuple[int, tuple[Any, ...]]] = []
        seen = set()
        for family, _type, _proto, _name, sockaddr in infos:
            if family not in (socket.AF_INET, socket.AF_INET6):
                continue
            ip = cast(str, sockaddr[0])  # AF_INET and AF_INET6 addresses start with the host
            reason = netguard.address_refusal(ip, self._settings)
            if reason is not None:
                pool.refusal = f"host {pool.host} resolves to a refused address: {reason}"
                return
            if (family, sockaddr) not in seen:
                seen.add((family, sockaddr))
                addrs.append((family, sockaddr))
        if not addrs:
            pool.dns_error = f"cannot resolve host {pool.host}: no IPv4/IPv6 address"
            return
        pool.addrs = addrs
        if pool.proxy is not None:
            pool.pinned = _pin(addrs, pool.port)
