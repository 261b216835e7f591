#!/usr/bin/env python3
"""awty's benchmark: the SPEC 11 figures, measured on this machine, against a fast local receiver.

Run it through ``scripts/bench`` (which builds .venv with the ``test,bench`` extras):

    ./scripts/bench                      # full sizes, 3 runs each, writes BENCHMARKS.md
    ./scripts/bench --quick --output /tmp/BENCH.md      # small sizes, 1 run each, < 1 minute
    ./scripts/bench --only slot,rss --runs 5            # some sections only

What it does:
  * starts a receiver on 127.0.0.1 answering ``204`` with keep-alive: nginx when installed, else
    a uvloop + httptools ``asyncio.Protocol`` server (2 processes sharing the port with
    SO_REUSEPORT); measures that receiver's own ceiling first, with a light load generator;
  * creates temporary homes under ``.bench/`` and measures each SPEC 11 figure (median of the
    runs, min and max shown), prints one table (rich) and writes a Markdown report;
  * stops everything it started (finally, atexit, and PR_SET_PDEATHSIG on its children).

Library measurements use ``awty.clock.FixedClock``; CLI subprocesses get ``AWTY_NOW``, so slots
are due without waiting. The figures are measurements, never pass/fail tests: the exit code is
non-zero only when the bench itself could not measure something (e.g. callbacks that failed).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import base64
import contextlib
import cProfile
import faulthandler
import hashlib
import hmac
import io
import json
import math
import os
import platform
import pstats
import shlex
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the venv's bin directory (not resolved: keep the venv)
AWTY_SCRIPT = BIN / "awty"
# Fixed secret: every callback is signed (SPEC 11 counts "sign" in end to end).
SECRET_TEXT = "whsec_" + base64.b64encode(b"awty-bench-secret-not-for-use!!!").decode()
SECRET = base64.b64decode(SECRET_TEXT[6:])
BASE = datetime(2030, 1, 1, tzinfo=UTC)  # slot times are built from here; clocks are fixed
R = 15  # minutes: awty's default resolution
RAISED = 128  # awty's default concurrency; the per-host cap is raised to it in one row
REQUESTS_THREADS = 32
PATH = "/hook"

_children: list[subprocess.Popen] = []


class SectionTimeout(KeyboardInterrupt):
    """A section ran past --section-timeout. Raised from SIGALRM, again every 20 ms until
    caught: an event loop (uvloop) whose tasks spin without yielding only lets go once every
    spinning task has been interrupted; a KeyboardInterrupt subclass so that no
    ``except Exception`` swallows it and asyncio re-raises it out of the loop."""


_alarm_on = [False]
_alarm_where: list[str] = []  # the stack when the section's time first ran out


def _on_alarm(signum, frame) -> None:
    if _alarm_on[0]:
        if not _alarm_where:
            _alarm_where.extend(traceback.format_stack(frame))
        raise SectionTimeout()


def _alarm(seconds: float | None) -> None:
    """Arm (seconds) or disarm (None) the section timeout."""
    if seconds is None:
        _alarm_on[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    else:
        signal.signal(signal.SIGALRM, _on_alarm)
        _alarm_where.clear()
        _alarm_on[0] = True
        signal.setitimer(signal.ITIMER_REAL, seconds, 0.02)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def _die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM if the bench dies (Linux), so nothing outlives it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PDEATHSIG
        except (OSError, AttributeError):
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"receiver did not listen on 127.0.0.1:{port}") from None
            time.sleep(0.05)


def _proc_cpu(pids: Iterable[int]) -> float:
    """utime + stime (seconds) of these processes, from /proc; 0 where unreadable."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick


def _self_cpu() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


_PYCACHE: list[Path] = []  # set by main: where subprocesses keep their bytecode cache


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment of the bench's subprocesses: no AWTY_* from the caller; bytecode cached
    as in any installed package (a PYTHONDONTWRITEBYTECODE=1 environment would recompile
    awty's modules from source on every call), under the work directory rather than in
    awty/__pycache__ (PYTHONPYCACHEPREFIX)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWTY_")
           and k not in ("PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE")}
    if _PYCACHE:
        env["PYTHONPYCACHEPREFIX"] = str(_PYCACHE[0])
    env.update(extra)
    return env


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _slot(k: int) -> datetime:
    return BASE + timedelta(minutes=R * k)


def _fmt_n(n: int) -> str:
    return f"{n:,}"


@dataclass
class Proc:
    rc: int
    wall: float
    maxrss_kb: int
    stdout: str
    stderr: str


def run_proc(cmd: Sequence[str], env: dict[str, str], workdir: Path, timeout: float,
             stdin_path: Path | None = None) -> Proc:
    """Run a subprocess with its own resource usage (``os.wait4``: per child, unlike
    RUSAGE_CHILDREN which keeps the maximum over all children ever waited for)."""
    out_path, err_path = workdir / ".proc.out", workdir / ".proc.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err, \
            (open(stdin_path, "rb") if stdin_path else open(os.devnull, "rb")) as inp:
        t0 = time.perf_counter()
        p = subprocess.Popen(list(cmd), stdin=inp, stdout=out, stderr=err, env=env,
                             preexec_fn=_die_with_parent)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        except BaseException:  # e.g. the section's time ran out: leave no child behind
            p.kill()
            os.waitpid(p.pid, 0)
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return Proc(p.returncode, wall, usage.ru_maxrss, out_path.read_text(errors="replace"),
                err_path.read_text(errors="replace"))


# --------------------------------------------------------------------------------------------
# receivers
# --------------------------------------------------------------------------------------------
class Receiver:
    name = "receiver"
    port = 0

    def pids(self) -> list[int]:
        return []

    def stop(self) -> None: ...

    def alive(self) -> bool:
        return True


class NginxReceiver(Receiver):
    def __init__(self, binary: str, workdir: Path, workers: int):
        self.prefix = workdir / "nginx"
        self.prefix.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        version = subprocess.run([binary, "-v"], capture_output=True, text=True).stderr.strip()
        self.name = f"{version.split(': ', 1)[-1]} ({workers} worker{'s' * (workers > 1)}, " \
                    f"return 204, keep-alive)"
        conf = self.prefix / "nginx.conf"
        p = self.prefix
        conf.write_text(f"""
worker_processes {workers};
daemon off;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {p}/body;
  proxy_temp_path {p}/proxy; fastcgi_temp_path {p}/fastcgi; uwsgi_temp_path {p}/uwsgi;
  scgi_temp_path {p}/scgi;
  client_body_buffer_size 64k;
  keepalive_requests 100000000;
  keepalive_timeout 600s;
  server {{
    listen 127.0.0.1:{self.port} backlog=4096;
    location / {{ return 204; }}
  }}
}}
""")
        self.proc = subprocess.Popen(
            [binary, "-e", str(p / "error.log"), "-p", str(p), "-c", str(conf)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=_die_with_parent)
        _children.append(self.proc)
        try:
            _wait_port(self.port)
        except RuntimeError:
            self.stop()
            raise

    def pids(self) -> list[int]:
        pid = self.proc.pid
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        return [pid, *map(int, kids)]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        _stop(self.proc, signal.SIGQUIT)


class PythonReceiver(Receiver):
    def __init__(self, procs: int):
        self.port = _free_port()
        try:
            import uvloop  # noqa: F401

            loop = "uvloop"
        except ImportError:
            loop = "asyncio"
        self.name = (f"Python {loop} + httptools asyncio.Protocol ({procs} process"
                     f"{'es' * (procs > 1)}, SO_REUSEPORT, 204, keep-alive)")
        self.procs = []
        for _ in range(procs):
            p = subprocess.Popen([sys.executable, __file__, "_serve", str(self.port),
                                  str(os.getpid())], stdin=subprocess.DEVNULL,
                                 preexec_fn=_die_with_parent)
            _children.append(p)
            self.procs.append(p)
        try:
            _wait_port(self.port)
            time.sleep(0.2)  # let every process reach accept()
        except RuntimeError:
            self.stop()
            raise

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def stop(self) -> None:
        for p in self.procs:
            _stop(p, signal.SIGTERM)


def _stop(p: subprocess.Popen, sig: int) -> None:
    if p.poll() is None:
        with contextlib.suppress(OSError):
            p.send_signal(sig)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def _stop_children() -> None:
    for p in _children:
        if p.poll() is None:
            with contextlib.suppress(OSError):
                p.kill()
            with contextlib.suppress(Exception):
                p.wait(5)


def _new_loop():
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def serve_main(port: int, parent: int, max_seconds: float = 4 * 3600) -> None:
    """The Python receiver (one process; several share the port with SO_REUSEPORT)."""
    import httptools

    resp = b"HTTP/1.1 204 No Content\r\nServer: awty-bench\r\n\r\n"
    closing = b"HTTP/1.1 204 No Content\r\nServer: awty-bench\r\nConnection: close\r\n\r\n"

    class Handler(asyncio.Protocol):
        __slots__ = ("t", "p")

        def connection_made(self, transport):
            self.t = transport
            self.p = httptools.HttpRequestParser(self)

        def data_received(self, data):
            try:
                self.p.feed_data(data)
            except httptools.HttpParserError:
                self.t.close()

        def on_message_complete(self):
            if self.p.should_keep_alive():
                self.t.write(resp)
            else:
                self.t.write(closing)
                self.t.close()

    loop = _new_loop()
    asyncio.set_event_loop(loop)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    loop.run_until_complete(loop.create_server(Handler, sock=sock, backlog=4096))
    deadline = time.monotonic() + max_seconds

    def watchdog():  # self-stopping: parent gone or too old
        if os.getppid() != parent or time.monotonic() > deadline:
            loop.stop()
        else:
            loop.call_later(1.0, watchdog)

    loop.call_soon(watchdog)
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    loop.run_forever()


def _sample_request(port: int) -> bytes:
    body = (b'{"id":"01JD3ZK5Q0X8V2M7R4T6Y9B1CE","entity":"order","key":"4242",'
            b'"payload":{"order":4242,"status":"placed"},"check":1,"attempt":1,'
            b'"slot":"203001010000","first_check_at":"2030-01-01T00:00:00Z"}')
    sig = "v1," + base64.b64encode(hashlib.sha256(body).digest()).decode()
    head = (f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nUser-Agent: awty/0.1.0\r\n"
            f"Content-Length: {len(body)}\r\nwebhook-id: 01JD3ZK5Q0X8V2M7R4T6Y9B1CE\r\n"
            f"webhook-timestamp: 1893456000\r\nwebhook-signature: {sig}\r\n"
            f"X-Awty-Check: 1\r\nX-Awty-Attempt: 1\r\n\r\n")
    return head.encode() + body


def loadgen_main(port: int, seconds: float, conns: int) -> None:
    """A light load generator for the receiver's ceiling: one request in flight per connection,
    responses counted by their blank line (the receiver answers 204: no body), no parsing."""
    req = _sample_request(port)
    count = [0]
    stop = [False]

    class Client(asyncio.Protocol):
        def connection_made(self, transport):
            self.t = transport
            self.tail = b""
            transport.write(req)

        def data_received(self, data):
            buf = self.tail + data
            n = buf.count(b"\r\n\r\n")
            if n:
                count[0] += n
                self.tail = b""
                if not stop[0]:
                    self.t.write(req)
            else:
                self.tail = buf[-3:]

    async def main():
        loop = asyncio.get_running_loop()
        ts = [await loop.create_connection(Client, "127.0.0.1", port) for _ in range(conns)]
        await asyncio.sleep(min(0.5, seconds / 4))  # warm up
        c0, t0 = count[0], time.perf_counter()
        await asyncio.sleep(seconds)
        c1, t1 = count[0], time.perf_counter()
        stop[0] = True
        for t, _ in ts:
            t.close()
        print(json.dumps({"requests": c1 - c0, "seconds": t1 - t0}))

    loop = _new_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def measure_ceiling(rx: Receiver, seconds: float, procs: int, conns: int) -> tuple[float, float]:
    """The receiver's ceiling (req/s) with ``procs`` load-generator processes; and the
    receiver's CPU use meanwhile (cores)."""
    cpu0 = _proc_cpu(rx.pids())
    gens = [subprocess.Popen([sys.executable, __file__, "_loadgen", str(rx.port), str(seconds),
                              str(conns)], stdout=subprocess.PIPE, text=True,
                             preexec_fn=_die_with_parent) for _ in range(procs)]
    _children.extend(gens)
    t0 = time.perf_counter()
    rate = 0.0
    for g in gens:
        out, _ = g.communicate(timeout=seconds + 60)
        d = json.loads(out.strip().splitlines()[-1])
        rate += d["requests"] / d["seconds"]
    cores = (_proc_cpu(rx.pids()) - cpu0) / (time.perf_counter() - t0)
    return rate, cores


# --------------------------------------------------------------------------------------------
# references: the same bodies, posted without awty's bookkeeping
# --------------------------------------------------------------------------------------------
def _signed_request_parts(job, attempt, port: int, version: str):
    """Body and headers exactly as awty sends them (callback_body + Standard Webhooks)."""
    from awty.executors.http import callback_body

    body = callback_body(job, attempt)
    ts = int(time.time())
    mac = hmac.new(SECRET, f"{job.id}.{ts}.".encode() + body, hashlib.sha256).digest()
    headers = {"Content-Type": "application/json", "User-Agent": f"awty/{version}",
               "webhook-id": job.id, "webhook-timestamp": str(ts),
               "webhook-signature": "v1," + base64.b64encode(mac).decode(),
               "X-Awty-Check": str(attempt.check), "X-Awty-Attempt": str(attempt.attempt)}
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
        mac = hmac.new(SECRET, f"{job.id}.{ts}.".encode() + body, hashlib.sha256).digest()
        return (f"{head0}Content-Length: {len(body)}\r\nwebhook-id: {job.id}\r\n"
                f"webhook-timestamp: {ts}\r\nwebhook-signature: v1,"
                f"{base64.b64encode(mac).decode()}\r\nX-Awty-Check: {attempt.check}\r\n"
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

    loop = _new_loop()
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
        body, headers = _signed_request_parts(job, attempt, port, __version__)
        r = s.post(url, data=body, headers=headers, timeout=30)
        return 200 <= r.status_code < 300

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as ex:
        ok = sum(ex.map(post, jobs))
    return time.perf_counter() - t0, ok


# --------------------------------------------------------------------------------------------
# awty homes
# --------------------------------------------------------------------------------------------
class Homes:
    def __init__(self, workdir: Path, url: str):
        self.workdir = workdir
        self.url = url
        self.n = 0

    def path(self, tag: str) -> Path:
        self.n += 1
        return self.workdir / f"home-{self.n:03d}-{tag}"

    def open(self, home: Path, now: datetime, per_host: int | None = None):
        """An ``Awty`` on a FixedClock, as shipped (per_host: raise its per-host cap)."""
        from awty.api import Awty
        from awty.clock import FixedClock

        caps = {}
        if per_host is not None:
            caps["per_host_concurrency"] = per_host
        return Awty(home, clock=FixedClock(now), env={"AWTY_SIGNING_SECRET": SECRET_TEXT},
                    **caps)

    def specs(self, n: int, at: Callable[[int], datetime], start: int = 0) -> list[dict]:
        url = self.url
        return [{"target": url, "at": _iso(at(i)), "payload": {"order": i, "status": "placed"},
                 "entity": "order", "key": str(i)} for i in range(start, start + n)]

    def fill(self, home: Path, n: int, at: Callable[[int], datetime], *, now: datetime,
             chunk: int = 50_000) -> float:
        """Add ``n`` jobs through the public ``add_many`` (rows and envelope files); returns
        the seconds add_many itself took."""
        spent = 0.0
        with self.open(home, now) as a:
            a.init()
            for start in range(0, n, chunk):
                specs = self.specs(min(chunk, n - start), at, start)
                t0 = time.perf_counter()
                a.add_many(specs)
                spent += time.perf_counter() - t0
        return spent


KEEP_HOMES_FREE = 20e9  # bytes the disk must keep free for homes to stay until the end
KEPT: list[Path] = []  # homes left for the final removal of the work directory
REMOVED_AT_ONCE: list[Path] = []


def _remove(path: Path) -> None:
    """A home the bench is done with stays until the end while the disk has room. ext4 makes
    creating files CPU-bound for one to five minutes after many were deleted nearby (its inode
    allocator skips every recently deleted inode: ``recently_deleted()`` was 45% of all samples
    in `perf` during a slow add_many), so deleting 100,000 envelopes just before a timed add
    measures the kernel, not awty: the same add_many took 6 s or 34 s."""
    if shutil.disk_usage(path.parent).free >= KEEP_HOMES_FREE:
        KEPT.append(path)
        return
    REMOVED_AT_ONCE.append(path)
    shutil.rmtree(path, ignore_errors=True)


def _settle() -> None:
    """Before a timed run: let the background removals of retired slot directories that
    earlier runs started finish, and write back what earlier steps left dirty (the homes just
    filled, the ones just removed), so that no run pays for another's disk work. A cron-driven
    home is in this state too: its jobs were added well before their slot."""
    from awty.slotdir import wait_purged

    wait_purged(timeout=600)
    if hasattr(os, "sync"):
        os.sync()
    _disk_quiet()


QUIET_WAITS: list[float] = []  # seconds each _settle() waited for the disk (reported)


def _disk_quiet(still: float = 0.5, limit: float = 30.0) -> None:
    """Wait until the work directory's disk has had no I/O for ``still`` seconds. sync()
    returns with the discards of files just deleted (ext4 ``discard``) still being issued: a
    run started then is slowed by disk work that is not its own (a 100,000-file add took 6 s
    or 19 s by that alone). Bounded: after ``limit`` seconds the run goes ahead."""
    stat_file = _disk_stat_file()
    if stat_file is None:
        return
    t0 = time.monotonic()
    last, since = None, t0
    while time.monotonic() - t0 < limit:
        f = stat_file.read_text().split()
        # reads, writes, in flight, discards completed (fields 1, 5, 9, 12)
        cur = (f[0], f[4], f[8], f[11] if len(f) > 11 else "")
        now = time.monotonic()
        if cur != last or f[8] != "0":
            last, since = cur, now
        elif now - since >= still:
            break
        time.sleep(0.05)
    QUIET_WAITS.append(time.monotonic() - t0)


WORKDIR_FOR_QUIET: list[str] = []


def _disk_stat_file() -> Path | None:
    try:
        st = os.stat(WORKDIR_FOR_QUIET[0] if WORKDIR_FOR_QUIET else ".")
    except OSError:
        return None
    path = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat")
    return path if path.exists() else None


def _disk_written() -> int:
    """Bytes the work directory's disk has written so far (0 where /sys does not say)."""
    path = _disk_stat_file()
    return int(path.read_text().split()[6]) * 512 if path else 0


def _remove_workdir(workdir: Path, base: Path) -> None:
    print(f"bench: removing {workdir} …", file=sys.stderr)
    try:  # rm: C, much faster than rmtree for the millions of envelopes the homes hold
        subprocess.run(["rm", "-rf", "--", str(workdir)], check=False)
    except OSError:
        shutil.rmtree(workdir, ignore_errors=True)
    with contextlib.suppress(OSError):
        base.rmdir()  # only when empty


def _purge_seconds() -> float:
    """How long the background removal of the slot directories just retired still runs."""
    from awty.slotdir import wait_purged

    t0 = time.perf_counter()
    wait_purged(timeout=600)
    return time.perf_counter() - t0


def _check_summary(summary: dict, n: int, what: str) -> None:
    done = summary.get("outcomes", {}).get("done", 0)
    if summary.get("ran") != n or done != n:
        raise RuntimeError(f"{what}: expected {n} callbacks done, got ran={summary.get('ran')} "
                           f"outcomes={summary.get('outcomes')}")


def _catchup_summary(c) -> dict:
    d = c.to_dict()
    return {"ran": d["ran"], "outcomes": d["outcomes"]}


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------
@dataclass
class Row:
    key: str
    label: str
    unit: str
    target: str = "—"
    check: Callable[[float], bool] | None = None
    fmt: str = "{:,.0f}"
    values: list[float] = field(default_factory=list)
    error: str | None = None
    skipped: bool = False

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def cell(self, v: float | None) -> str:
        return "—" if v is None else self.fmt.format(v) + (f" {self.unit}" if self.unit else "")

    @property
    def met(self) -> str:
        if self.error:
            return "error"
        if self.skipped or not self.values:
            return "skipped" if self.skipped else "—"
        if self.check is None:
            return "—"
        return "yes" if self.check(self.median) else "NO"


class Report:
    def __init__(self, args):
        self.args = args
        self.rows: dict[str, Row] = {}
        self.notes: list[str] = []
        self.details: list[str] = []
        self.imports: list[tuple[str, float, float]] = []
        self.notable: list[tuple[str, float]] = []
        self.facts: list[tuple[str, str]] = []
        self.profiles: list[str] = []

    def row(self, key: str, label: str, unit: str, target: str = "—",
            check: Callable[[float], bool] | None = None, fmt: str = "{:,.0f}") -> Row:
        r = self.rows[key] = Row(key, label, unit, target, check, fmt)
        return r

    def table_rows(self) -> list[list[str]]:
        out = []
        for r in self.rows.values():
            if r.error:
                med, lo, hi = f"error: {r.error}", "", ""
            elif r.skipped:
                med, lo, hi = "skipped", "", ""
            else:
                med = r.cell(r.median)
                lo = r.cell(min(r.values)) if r.values else "—"
                hi = r.cell(max(r.values)) if r.values else "—"
            out.append([r.label, med, lo, hi, str(len(r.values)), r.target, r.met])
        return out


HEADERS = ["Benchmark", "Median", "Min", "Max", "Runs", "SPEC 11 target", "Met"]


def print_table(rep: Report, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    width = None if sys.stdout.isatty() else max(170, int(os.environ.get("COLUMNS") or 0))
    console = Console(width=width)
    t = Table(title=title, title_justify="left")
    for h in HEADERS:
        t.add_column(h, justify="left" if h in ("Benchmark", "SPEC 11 target") else "right",
                     overflow="fold")
    for cells in rep.table_rows():
        met = cells[-1]
        style = {"yes": "green", "NO": "bold red", "error": "bold red"}.get(met)
        t.add_row(*cells[:-1], f"[{style}]{met}[/]" if style else met)
    console.print(t)
    for n in rep.notes:
        console.print(f"• {n}", highlight=False, markup=False)
    if rep.imports:
        console.print("`awty add`: top imports by cumulative time (python -X importtime; "
                      "↳ = nested in the line above it)", highlight=False, markup=False)
        it = Table()
        it.add_column("module")
        it.add_column("cumulative ms", justify="right")
        it.add_column("self ms", justify="right")
        for name, cum, self_ in rep.imports:
            it.add_row(name, f"{cum:.1f}", f"{self_:.1f}")
        console.print(it)


def write_markdown(rep: Report, path: Path, title: str) -> None:
    a = rep.args
    lines = [f"# {title}", ""]
    if a.quick:
        lines += ["> **Quick mode**: reduced sizes and one run each — a smoke test of the bench, "
                  "not the SPEC 11 figures.", ""]
    lines += ["Written by `scripts/bench`. Each figure is the median of the runs shown (min and "
              "max beside it); targets are SPEC 11's. The figures are measurements, not tests.",
              "", "## Command", "", "```", rep.command, "```", "", "## Machine", "",
              "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rep.facts]
    lines += ["", "## Results", "", "| " + " | ".join(HEADERS) + " |",
              "|" + "|".join(["---"] + ["---:"] * 4 + ["---", "---"]) + "|"]
    for cells in rep.table_rows():
        cells = [c.replace("|", "\\|") for c in cells]
        if cells[-1] == "NO":
            cells[-1] = "**NO**"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Notes", ""] + [f"- {n}" for n in rep.notes]
    if rep.imports:
        lines += ["", "## `awty add` import time", "",
                  "One `awty add` under `python -X importtime`: the top-level imports by "
                  "cumulative time, each followed by its heaviest direct children (↳, counted "
                  "in the parent's figure). A top-level line that is not `awty.cli` was "
                  "imported while the command ran (a lazy import).", "",
                  "| module | cumulative ms | self ms |", "|---|---:|---:|"]
        lines += [f"| `{n}` | {c:.1f} | {s:.1f} |" for n, c, s in rep.imports]
        if rep.notable:
            lines += ["", "Heavy modules loaded by that call (cumulative ms where first imported): "
                      + ", ".join(f"`{n}` {c:.1f}" for n, c in rep.notable) + "."]
    if rep.details:
        lines += ["", "## Per-run details", ""] + [f"- {d}" for d in rep.details]
    if rep.profiles:
        lines += ["", "## Profiles", ""] + rep.profiles
    path.write_text("\n".join(lines) + "\n")


def _spy_summary(raw: Path, wall: float, top: int = 30, rate: int = 250) -> str:
    """py-spy's raw (collapsed) stacks -> samples per thread, then per function: self (the
    innermost frame) and inclusive (anywhere on the stack), as % of all samples."""
    threads: dict[str, int] = {}
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = stack.split(";")
        if frames and frames[0].startswith(("thread (", "process ")):
            while frames and frames[0].startswith(("thread (", "process ")):
                head = frames.pop(0)
                if head.startswith("thread ("):
                    threads[head] = threads.get(head, 0) + count
        if not frames:
            continue
        total += count
        own[frames[-1]] = own.get(frames[-1], 0) + count
        for f in set(frames):
            incl[f] = incl.get(f, 0) + count
    if not total:
        return "no samples\n"
    out = [f"{total} samples over {wall:.2f} s of wall time ({rate} Hz, every thread, idle "
           f"samples excluded: {total / rate / wall:.2f} busy threads on average)", "",
           "samples per thread:"]
    out += [f"  {n:7d} {n / total:6.1%}  {t}" for t, n in
            sorted(threads.items(), key=lambda x: -x[1])]
    for title, d in (("self (innermost frame)", own), ("inclusive (on the stack)", incl)):
        out += ["", f"top {top} functions by {title}:"]
        out += [f"  {n / total:6.1%}  {n / rate:7.2f} s  {f}" for f, n in
                sorted(d.items(), key=lambda x: -x[1])[:top]]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# sections
# --------------------------------------------------------------------------------------------
class Bench:
    def __init__(self, args, rep: Report, rx: Receiver, workdir: Path):
        self.a = args
        self.rep = rep
        self.rx = rx
        self.workdir = workdir
        self.url = f"http://127.0.0.1:{rx.port}{PATH}"
        self.homes = Homes(workdir, self.url)
        self.failed = False

    def cli_env(self, now: datetime) -> dict[str, str]:
        return _clean_env(AWTY_NOW=_iso(now), AWTY_SIGNING_SECRET=SECRET_TEXT)

    def awty_cli(self, args: Sequence[str], now: datetime, timeout: float = 600,
                 python_flags: Sequence[str] = (), stdin_path: Path | None = None) -> Proc:
        cmd = ([sys.executable, *python_flags, str(AWTY_SCRIPT)] if python_flags
               else [str(AWTY_SCRIPT)])
        p = run_proc([*cmd, *args], self.cli_env(now), self.workdir, timeout, stdin_path)
        if p.rc != 0:
            raise RuntimeError(f"awty {' '.join(args[:2])} exited {p.rc}: "
                               f"{p.stderr.strip()[-400:]}")
        return p

    def warm_up(self) -> None:
        """Exercise every library path once, untimed, so that the first timed run does not pay
        for awty's lazy imports (compiled from source when bytecode is not written)."""
        home = self.homes.path("warm-up")
        slot = _slot(1)
        self.homes.fill(home, 10, lambda i: slot, now=slot - timedelta(hours=1))
        with self.homes.open(home, slot + timedelta(seconds=5)) as a:
            list(a.list(slot=slot))
            a.run_slot(slot)
            a.catchup()
        _remove(home)

    def check_receiver(self) -> None:
        if not self.rx.alive():
            raise RuntimeError("the receiver died")

    def profiled(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` once more under a profiler (--profile; not counted in the figures):
        py-spy when installed (samples every thread: the runner's store thread too), else
        cProfile (main thread only). Writes DIR/<name>.txt, a function-level summary."""
        out = Path(self.a.profile)
        out.mkdir(parents=True, exist_ok=True)
        _settle()
        spy = shutil.which("py-spy", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        t0 = time.perf_counter()
        if spy:
            raw = out / f"{name}.raw"
            rec = subprocess.Popen([spy, "record", "--pid", str(os.getpid()), "--rate", "250",
                                    "--format", "raw", "--threads", "--function", "--output",
                                    str(raw)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            _children.append(rec)
            time.sleep(1.0)  # let it attach
            t0 = time.perf_counter()
            try:
                return fn()
            finally:
                wall = time.perf_counter() - t0
                rec.send_signal(signal.SIGINT)
                try:
                    rec.wait(60)
                except subprocess.TimeoutExpired:
                    rec.kill()
                text = _spy_summary(raw, wall) if raw.exists() else "py-spy wrote nothing\n"
                (out / f"{name}.txt").write_text(text)
                self.rep.profiles.append(f"- `{name}`: {wall:.2f} s under py-spy (250 Hz, all "
                                         f"threads, idle excluded): `{out / (name + '.txt')}`")
        prof = cProfile.Profile()
        prof.enable()
        try:
            return fn()
        finally:
            prof.disable()
            wall = time.perf_counter() - t0
            prof.dump_stats(out / f"{name}.prof")
            text = io.StringIO()
            st = pstats.Stats(prof, stream=text)
            st.sort_stats("tottime").print_stats(25)
            st.sort_stats("cumulative").print_stats(30)
            (out / f"{name}.txt").write_text(text.getvalue())
            self.rep.profiles.append(f"- `{name}`: {wall:.2f} s under cProfile (main thread "
                                     f"only): `{out / (name + '.txt')}` (`.prof` beside it)")

    # 0 -------------------------------------------------------------------------------------
    def ceiling(self) -> None:
        r = self.rep.row("ceiling", "receiver ceiling (its own max, load generator)", "req/s")
        seconds = 0.7 if self.a.quick else 3.0
        for _ in range(1 if self.a.quick else 3):
            rate, cores = measure_ceiling(self.rx, seconds, self.a.loadgen_procs, 256)
            r.values.append(rate)
        self.rep.notes.append(
            f"Receiver: {self.rx.name}. Its ceiling was measured first with "
            f"{self.a.loadgen_procs} light load-generator process(es) (256 keep-alive "
            f"connections, one request in flight each, no response parsing) on the same "
            f"{os.cpu_count()} cores, so it is a lower bound. The receiver competes with awty "
            f"for these {os.cpu_count()} cores in every figure below.")
        self.rep.notes.append(
            "Before every timed run the bench waits for awty's background removals, calls "
            "sync() and then waits (up to 30 s) until the disk has had no I/O for 0.5 s, so "
            "that no run pays for the disk work (writes, discards of deleted files) of the "
            "homes filled or removed before it.")

    # 1 -------------------------------------------------------------------------------------
    def cli_add(self) -> None:
        n = self.a.cli_calls
        rm = self.rep.row("add_median", f"awty add (CLI) median wall, {n} calls", "ms",
                          "≤ 100 ms", lambda v: v <= 100, "{:,.1f}")
        rp = self.rep.row("add_p90", f"awty add (CLI) p90 wall, {n} calls", "ms", fmt="{:,.1f}")
        now = BASE
        home = self.homes.path("cli-add")
        self.awty_cli(["init", "--home", str(home)], now)
        args = ["add", self.url, "--in", "2h", "--payload", '{"order": 42}', "--entity", "order",
                "--key", "42", "--home", str(home)]
        for _ in range(2):  # warm the page cache and write the bytecode cache
            self.awty_cli(args, now)
        walls, rss = [], []
        for _ in range(n):
            p = self.awty_cli(args, now)
            walls.append(p.wall * 1000)
            rss.append(p.maxrss_kb)
        rm.values = walls
        s = sorted(walls)
        p90 = s[max(0, math.ceil(0.9 * len(s)) - 1)]
        rp.values = [p90]
        # The interpreter alone, for scale.
        base = []
        for _ in range(max(3, min(10, n))):
            p = run_proc([sys.executable, "-c", "pass"], _clean_env(), self.workdir, 60)
            base.append(p.wall * 1000)
        bare_import = []
        for _ in range(max(3, min(10, n))):
            p = run_proc([sys.executable, "-c", "import awty.cli"], _clean_env(), self.workdir,
                         60)
            bare_import.append(p.wall * 1000)
        inherited = ""
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            # What this environment gets (no .pyc written for awty: compiled on every call).
            env = {k: v for k, v in os.environ.items() if not k.startswith("AWTY_")}
            env.update({k: v for k, v in self.cli_env(now).items() if k.startswith("AWTY_")})
            env.pop("PYTHONPYCACHEPREFIX", None)
            ws = [run_proc([str(AWTY_SCRIPT), *args], env, self.workdir, 60).wall * 1000
                  for _ in range(max(3, min(10, n)))]
            inherited = (f" This shell exports PYTHONDONTWRITEBYTECODE=1; with it (no .pyc "
                         f"for awty's modules unless they already exist, so compiled from "
                         f"source on every call) the same add takes {statistics.median(ws):.1f} "
                         f"ms (median of {len(ws)}); the figures use a bytecode cache, as an "
                         f"installed package has.")
        self.rep.notes.append(
            f"`awty add`: a subprocess of the venv's `awty` console script on an existing home "
            f"(2 warm-up calls not counted; subprocesses keep their bytecode under the work "
            f"directory, PYTHONPYCACHEPREFIX).{inherited} For scale, `python -c pass` takes "
            f"{statistics.median(base):.1f} ms and `python -c 'import awty.cli'` "
            f"{statistics.median(bare_import):.1f} ms (medians); peak RSS of one add "
            f"{statistics.median(rss) / 1024:.1f} MiB.")
        # python -X importtime of one add
        p = self.awty_cli(args, now, python_flags=["-X", "importtime"])
        entries = []  # (name, depth, self ms, cumulative ms)
        for line in p.stderr.splitlines():
            if not line.startswith("import time:") or "imported package" in line:
                continue
            parts = line[len("import time:"):].split("|")
            if len(parts) != 3:
                continue
            try:
                self_us, cum_us = int(parts[0]), int(parts[1])
            except ValueError:
                continue
            name = parts[2]
            depth = max(0, (len(name) - len(name.lstrip(" ")) - 1) // 2)
            entries.append((name.strip(), depth, self_us / 1000, cum_us / 1000))
        # importtime prints a module after the imports nested in it: a top-level line closes
        # the group of depth-1 lines just before it (its direct children).
        groups, kids = [], []
        for e in entries:
            if e[1] == 1:
                kids.append(e)
            elif e[1] == 0:
                groups.append((e, kids))
                kids = []
        self.rep.imports = []
        for (nm, _, sf, cum), children in sorted(groups, key=lambda g: -g[0][3])[:8]:
            self.rep.imports.append((nm, cum, sf))
            for cn, _, csf, ccum in sorted(children, key=lambda c: -c[3])[:4]:
                if ccum >= 2.0:
                    self.rep.imports.append(("↳ " + cn, ccum, csf))
        total = sum(e[3] for e in entries if e[1] == 0)
        notable = ("typer", "click", "rich", "sqlite_utils", "requests", "filelock", "dateutil",
                   "httptools", "uvloop", "pluggy", "tomllib", "asyncio", "json", "sqlite3",
                   "urllib.request", "email", "ssl", "hashlib", "awty.api", "awty.cli")
        seen = {}
        for nm, _, _, cum in entries:
            if nm in notable and nm not in seen:
                seen[nm] = cum
        self.rep.notable = sorted(seen.items(), key=lambda x: -x[1])
        self.rep.details.append(
            f"`awty add` walls (ms): {', '.join(f'{w:.0f}' for w in walls)}; "
            f"imports under -X importtime total {total:.1f} ms (sum of top-level cumulative "
            f"figures; importtime itself inflates them).")

    # 2 -------------------------------------------------------------------------------------
    def batch(self) -> None:
        n = self.a.batch_jobs
        rl = self.rep.row("add_many", f"add_many (library), {_fmt_n(n)} jobs", "jobs/s",
                          "≥ 20,000 jobs/s", lambda v: v >= 20_000)
        rc = self.rep.row("add_batch", f"add --batch FILE (CLI), {_fmt_n(n)} jobs", "jobs/s",
                          "≥ 20,000 jobs/s", lambda v: v >= 20_000)
        now = BASE

        def at(i: int) -> datetime:  # spread over one day of slots
            return BASE + timedelta(minutes=5 + R * (i % 96))

        jsonl = self.workdir / "batch.jsonl"
        with open(jsonl, "w") as f:
            for spec in self.homes.specs(n, at):
                f.write(json.dumps(spec) + "\n")
        for run in range(self.a.runs):
            home = self.homes.path("add-many")
            with self.homes.open(home, now) as a:
                a.init()
                specs = self.homes.specs(n, at)
                _settle()
                c0, w0 = _self_cpu(), _disk_written()
                t0 = time.perf_counter()
                res = a.add_many(specs)
            d = time.perf_counter() - t0  # close() included: it may checkpoint the WAL
            cpu, written = _self_cpu() - c0, _disk_written() - w0
            assert len(res) == n
            rl.values.append(n / d)
            _remove(home)
            home = self.homes.path("add-batch")
            self.awty_cli(["init", "--home", str(home)], now)
            _settle()
            p = self.awty_cli(["add", "--batch", str(jsonl), "--home", str(home)], now)
            rc.values.append(n / p.wall)
            self.rep.details.append(
                f"batch run {run + 1}: add_many {d:.2f} s ({cpu / d:.0%} of it on a CPU; the "
                f"disk wrote {written / 1e6:,.0f} MB meanwhile); CLI add --batch {p.wall:.2f} s wall "
                f"(process start included), peak RSS {p.maxrss_kb / 1024:.0f} MiB")
            _remove(home)
        if self.a.profile:
            home = self.homes.path("add-many-prof")
            with self.homes.open(home, now) as a:
                a.init()
                specs = self.homes.specs(n, at)
                self.profiled("add_many", lambda: a.add_many(specs))
            _remove(home)
        self.rep.notes.append(
            f"Batch add: {_fmt_n(n)} HTTP jobs (small JSON payload, entity and key) spread over "
            f"96 slots; add_many timed alone (specs built beforehand, home initialised; close() "
            f"included); the CLI figure is the whole `awty add --batch` process, start-up and "
            f"output included.")
        _remove(jsonl)

    # 3 -------------------------------------------------------------------------------------
    def slot(self) -> None:
        n, nreq = self.a.slot_jobs, self.a.requests_jobs
        ra = self.rep.row("slot", f"run-slot end to end (library), {_fmt_n(n)} callbacks",
                          "callbacks/s", "≥ 10,000 /s", lambda v: v >= 10_000)
        rb = self.rep.row("bare", f"bare asyncio+httptools reference, {_fmt_n(n)} posts",
                          "posts/s")
        rq = self.rep.row("requests", f"requests.Session pool reference ({REQUESTS_THREADS} "
                          f"threads), {_fmt_n(nreq)} posts", "posts/s")
        rp = self.rep.row("slot_purge", "run-slot, then until its retired slot directory is "
                          f"deleted (background `rm`), {_fmt_n(n)} callbacks", "callbacks/s")
        rd = self.rep.row("slot_raised", f"run-slot (library), per-host cap raised to "
                          f"{RAISED}, {_fmt_n(n)} callbacks", "callbacks/s")
        rr = self.rep.row("ratio_bare", "run-slot / bare reference", "×", "≥ 0.5×",
                          lambda v: v >= 0.5, "{:.2f}")
        rs = self.rep.row("ratio_requests", "run-slot / requests reference", "×", fmt="{:.1f}")
        from awty.model import Attempt
        from awty.slots import slot_id

        try:
            import requests  # noqa: F401
            have_requests = True
        except ImportError:
            have_requests = False
            rq.error = rs.error = "requests is not installed (the bench extra)"
        from awty.config import Settings

        in_flight = Settings().per_host_concurrency  # what awty keeps in flight to one host
        slot = _slot(4)
        sid = slot_id(slot)
        attempt = Attempt(slot=sid, check=1, attempt=1, timeout=30.0)
        for run in range(self.a.runs):
            home = self.homes.path("slot")
            self.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1))
            with self.homes.open(home, slot + timedelta(seconds=5)) as a:
                jobs = list(a.list(slot=slot))
            assert len(jobs) == n, len(jobs)
            # the ceiling first: bare client, same bodies, same receiver
            _settle()
            rx0, me0 = _proc_cpu(self.rx.pids()), _self_cpu()
            tb, ok = bare_reference(jobs, attempt, self.rx.port, in_flight)
            rxb, meb = _proc_cpu(self.rx.pids()) - rx0, _self_cpu() - me0
            if ok != n:
                raise RuntimeError(f"bare reference: {ok} of {n} answered 2xx")
            rb.values.append(n / tb)
            # awty
            _settle()
            with self.homes.open(home, slot + timedelta(seconds=5)) as a:
                rx0, me0 = _proc_cpu(self.rx.pids()), _self_cpu()
                t0 = time.perf_counter()
                s = a.run_slot(slot)
            ta = time.perf_counter() - t0  # close() included: it may checkpoint the WAL
            rxa, mea = _proc_cpu(self.rx.pids()) - rx0, _self_cpu() - me0
            tp = _purge_seconds()
            rp.values.append(n / (ta + tp))
            _check_summary(s.to_dict(), n, "run-slot")
            ra.values.append(n / ta)
            rr.values.append(tb / ta)
            # the same with the per-host cap raised to awty's concurrency (informational)
            home2 = self.homes.path("slot-raised")
            self.homes.fill(home2, n, lambda i: slot, now=slot - timedelta(hours=1))
            _settle()
            with self.homes.open(home2, slot + timedelta(seconds=5), per_host=RAISED) as a:
                t0 = time.perf_counter()
                s2 = a.run_slot(slot)
            td = time.perf_counter() - t0
            _check_summary(s2.to_dict(), n, f"run-slot (per-host cap {RAISED})")
            rd.values.append(n / td)
            _remove(home2)
            line = (f"run-slot run {run + 1}: awty {ta:.2f} s ({mea / n * 1e6:.0f} µs CPU per "
                    f"callback in awty's process, receiver {rxa / ta:.0%} of a core; its retired slot "
                    f"directory deleted {tp:.2f} s after it returned); bare "
                    f"{tb:.2f} s ({meb / n * 1e6:.0f} µs CPU per post, receiver "
                    f"{rxb / tb:.0%} of a core); awty with its per-host cap raised to {RAISED} "
                    f"{td:.2f} s")
            if have_requests:
                sub = jobs[:nreq]
                _settle()
                tq, okq = requests_reference(sub, attempt, self.rx.port, REQUESTS_THREADS)
                if okq != len(sub):
                    raise RuntimeError(f"requests reference: {okq} of {len(sub)} answered 2xx")
                rq.values.append(len(sub) / tq)
                rs.values.append((n / ta) / (len(sub) / tq))
                line += f"; requests {tq:.2f} s for {_fmt_n(len(sub))}"
            self.rep.details.append(line)
            self.check_receiver()
            _remove(home)
        if self.a.profile:
            home = self.homes.path("slot-prof")
            self.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1))
            with self.homes.open(home, slot + timedelta(seconds=5)) as a:
                self.profiled("run_slot", lambda: a.run_slot(slot))
            _remove(home)
        self.rep.notes.append(
            f"run-slot: `Awty.run_slot` timed in-process (FixedClock 5 s after the boundary, a "
            f"fresh `Awty` on a home holding {_fmt_n(n)} due jobs; claim, sign, send, record "
            f"and history included, and `close()` (which may checkpoint the WAL), as in every "
            f"library figure here; each callback signed, Standard Webhooks). The finished "
            f"slot's envelopes are not unlinked one by one: its directory is renamed out of "
            f"the tree and a detached `rm -rf` deletes it after `run_slot` returns; the row "
            f"'then until its retired slot directory is deleted' stops the clock only when "
            f"that `rm` has finished. "
            f"awty as shipped: concurrency {Settings().concurrency}, at most {in_flight} in flight to "
            f"one host (its per-host cap), so the bare reference keeps {in_flight} in flight "
            f"too; the row 'per-host cap raised to {RAISED}' is awty with as many in flight "
            f"as its concurrency, for comparison. The references post the same bodies "
            f"(`awty.executors.http.callback_body` on the same jobs) with the same headers and "
            f"signature, built per request inside the timed section, to the same receiver in "
            f"the same run: bare = uvloop/asyncio + httptools, {in_flight} keep-alive "
            f"connections, no bookkeeping; requests = {REQUESTS_THREADS} threads, one Session "
            f"each.")

    # 4 -------------------------------------------------------------------------------------
    def flat(self) -> None:
        n, pending = self.a.flat_due, self.a.flat_pending
        r0 = self.rep.row("flat0", f"flatness: {_fmt_n(n)}-job slot, 0 pending", "s",
                          fmt="{:.3f}")
        r1 = self.rep.row("flat1", f"flatness: {_fmt_n(n)}-job slot, {_fmt_n(pending)} pending",
                          "s", fmt="{:.3f}")
        rr = self.rep.row("flat_ratio", "flatness ratio (pending / none)", "×", "≤ 1.2×",
                          lambda v: v <= 1.2, "{:.2f}")
        empty, full = self.homes.path("flat-empty"), self.homes.path("flat-pending")
        week = 7 * 96
        gen_now = BASE - timedelta(hours=1)
        t0 = time.perf_counter()
        spent = self.homes.fill(full, pending,
                                lambda i: BASE + timedelta(days=2, minutes=R * (i % week) + 1),
                                now=gen_now)
        gen_wall = time.perf_counter() - t0
        with self.homes.open(empty, gen_now) as a:
            a.init()
        db_size = (full / "awty.db").stat().st_size
        runs = self.a.flat_runs
        for run in range(-1, runs):  # run -1: a warm-up of both homes, not counted
            slot = _slot(2 + run)
            times = {}
            order = (empty, full) if run % 2 == 0 else (full, empty)
            for home in order:
                self.homes.fill(home, n, lambda i, s=slot: s, now=gen_now)
                _settle()
                with self.homes.open(home, slot + timedelta(seconds=5)) as a:
                    t0 = time.perf_counter()
                    s = a.run_slot(slot)
                times[home] = time.perf_counter() - t0  # close() included
                _check_summary(s.to_dict(), n, "flatness run-slot")
            self.rep.details.append(
                f"flatness {'warm-up' if run < 0 else f'run {run + 1}'}: 0 pending "
                f"{times[empty]:.3f} s, {_fmt_n(pending)} pending {times[full]:.3f} s "
                f"({times[full] / times[empty]:.2f}×; "
                f"{'empty home first' if order[0] == empty else 'full home first'})")
            if run >= 0:
                r0.values.append(times[empty])
                r1.values.append(times[full])
                rr.values.append(times[full] / times[empty])
            self.check_receiver()
        with self.homes.open(full, BASE) as a:
            left = a.store.count_pending() if hasattr(a.store, "count_pending") else None
        self.rep.notes.append(
            f"Flatness: the {_fmt_n(pending)} pending jobs were added through the public "
            f"`add_many` in chunks of 50,000 (rows and envelope files, exactly as a user's adds), "
            f"spread over {week} future slots (one week); that took {gen_wall:.0f} s "
            f"({pending / spent:,.0f} jobs/s inside add_many); database {db_size / 1e6:,.0f} MB. "
            f"Each run adds {_fmt_n(n)} jobs to a fresh past slot in both homes, then times "
            f"`run_slot` (homes alternate order); {runs} runs (they are cheap once the rows "
            f"exist) after one uncounted warm-up run of each home, as a cron-driven home is "
            f"warm from its previous slot."
            + (f" Pending after the runs: {_fmt_n(left)}." if left is not None else ""))
        _remove(empty)
        _remove(full)

    # 5 -------------------------------------------------------------------------------------
    def catchup(self) -> None:
        k, per = self.a.catchup_slots, self.a.catchup_per_slot
        total = k * per
        rc = self.rep.row("catchup", f"catch-up {k} slots × {_fmt_n(per)}", "s", fmt="{:.2f}")
        ro = self.rep.row("oneslot", f"one slot of {_fmt_n(total)}", "s", fmt="{:.2f}")
        rr = self.rep.row("catchup_ratio", "catch-up ratio (missed slots / one slot)", "×",
                          "≤ 1.2×", lambda v: v <= 1.2, "{:.2f}")
        gen_now = BASE - timedelta(hours=1)
        run_now = _slot(k) + timedelta(seconds=5)  # every missed slot is in the past
        for run in range(self.a.runs):
            hc, ho = self.homes.path("catchup"), self.homes.path("one-slot")
            self.homes.fill(hc, total, lambda i: _slot(i // per), now=gen_now)
            self.homes.fill(ho, total, lambda i: _slot(k - 1), now=gen_now)
            times = {}
            for home in ((hc, ho) if run % 2 == 0 else (ho, hc)):
                _settle()
                with self.homes.open(home, run_now) as a:
                    t0 = time.perf_counter()
                    if home == hc:
                        c = a.catchup()
                        summary = _catchup_summary(c)
                        nslots = sum(1 for s in c.slots if s.ran)
                    else:
                        summary = a.run_slot(_slot(k - 1)).to_dict()
                times[home] = time.perf_counter() - t0  # close() included
                _check_summary(summary, total, "catch-up" if home == hc else "one slot")
            rc.values.append(times[hc])
            ro.values.append(times[ho])
            rr.values.append(times[hc] / times[ho])
            self.rep.details.append(
                f"catch-up run {run + 1}: {nslots} slots ran in {times[hc]:.2f} s "
                f"({total / times[hc]:,.0f}/s); one slot {times[ho]:.2f} s "
                f"({total / times[ho]:,.0f}/s)")
            self.check_receiver()
            _remove(hc)
            _remove(ho)
        if self.a.profile:
            hc, ho = self.homes.path("catchup-prof"), self.homes.path("one-slot-prof")
            self.homes.fill(hc, total, lambda i: _slot(i // per), now=gen_now)
            self.homes.fill(ho, total, lambda i: _slot(k - 1), now=gen_now)
            with self.homes.open(hc, run_now) as a:
                self.profiled("catchup", a.catchup)
            with self.homes.open(ho, run_now) as a:
                self.profiled("one_slot", lambda: a.run_slot(_slot(k - 1)))
            _remove(hc)
            _remove(ho)
        self.rep.notes.append(
            f"Catch-up: `Awty.catchup()` over {k} missed slots of {_fmt_n(per)} jobs vs "
            f"`run_slot` of one slot holding {_fmt_n(total)}, both against the receiver, "
            f"fresh homes each run, same FixedClock. Both retire their finished slot "
            f"directories and start one background `rm` when they return; the bench waits "
            f"for it before the next timed run.")

    # 6 -------------------------------------------------------------------------------------
    def rss(self) -> None:
        n = self.a.rss_jobs
        rm = self.rep.row("rss", f"run-slot (CLI) peak RSS, {_fmt_n(n)}-job slot", "MB",
                          "≤ 150 MB", lambda v: v <= 150, "{:,.1f}")
        rt = self.rep.row("rss_rate", f"run-slot (CLI) throughput, {_fmt_n(n)} callbacks",
                          "callbacks/s")
        from awty.slots import slot_id

        slot = _slot(8)
        for run in range(self.a.runs):
            home = self.homes.path("rss")
            self.homes.fill(home, n, lambda i: slot, now=slot - timedelta(hours=1))
            _settle()
            p = self.awty_cli(["run-slot", slot_id(slot), "--json", "--home", str(home)],
                              slot + timedelta(seconds=5), timeout=1800)
            summary = json.loads(p.stdout)
            _check_summary(summary, n, "run-slot (CLI)")
            rm.values.append(p.maxrss_kb * 1024 / 1e6)
            rt.values.append(n / p.wall)
            self.rep.details.append(
                f"rss run {run + 1}: peak RSS {p.maxrss_kb / 1024:.1f} MiB, wall {p.wall:.2f} s "
                f"(slot {summary.get('seconds')} s inside)")
            self.check_receiver()
            _remove(home)
        self.rep.notes.append(
            f"RSS: `awty run-slot <slot> --json` as a subprocess with AWTY_NOW 5 s after the "
            f"boundary; peak RSS from `os.wait4` (ru_maxrss of that child alone), MB = 10^6 "
            f"bytes; throughput is {_fmt_n(n)} / the process's wall time (start-up included).")


# --------------------------------------------------------------------------------------------
# machine facts and main
# --------------------------------------------------------------------------------------------
class Load:
    """How busy the machine was, besides the bench: /proc/stat busy time minus the bench's own
    CPU (itself, its reaped children, its receiver's processes)."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.busy0 = self._busy()
        self.ours0 = self._ours(())
        self.load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0

    @staticmethod
    def _busy() -> float:
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
        except (OSError, ValueError):
            return 0.0
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        guest = sum(v[8:10]) if len(v) > 9 else 0  # already counted in user/nice
        return (sum(v) - idle - guest) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _ours(receiver_pids: Iterable[int]) -> float:
        import resource

        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
                + _proc_cpu(receiver_pids))

    def other_cores(self, receiver_pids: Iterable[int]) -> float:
        wall = time.monotonic() - self.t0
        other = (self._busy() - self.busy0) - (self._ours(receiver_pids) - self.ours0)
        return max(0.0, other / wall) if wall > 0 else 0.0


def _source_hash() -> str:
    h = hashlib.sha256()
    for path in sorted((ROOT / "awty").rglob("*.py")):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def machine_facts(rx: Receiver, workdir: Path) -> list[tuple[str, str]]:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    try:
        import uvloop

        uv = f"yes ({uvloop.__version__})"
    except ImportError:
        uv = "no"
    try:
        import httptools

        ht = httptools.__version__
    except (ImportError, AttributeError):
        ht = "?"
    import awty

    rev = "?"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip() or "?"
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--",
                                "awty"], capture_output=True, text=True, timeout=10).stdout
        if dirty.strip():
            rev += " + uncommitted changes in awty/"
    fs = "?"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        fs = subprocess.run(["df", "-T", str(workdir)], capture_output=True, text=True,
                            timeout=10).stdout.splitlines()[-1].split()[1]
    return [
        ("date", datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")),
        ("cpu", cpu),
        ("cores", str(os.cpu_count())),
        ("memory", mem),
        ("os", f"{platform.system()} {platform.release()}"),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("sqlite", sqlite3.sqlite_version),
        ("uvloop", uv),
        ("httptools", ht),
        ("awty", f"{awty.__version__} (git {rev}; sha256 of awty/*.py {_source_hash()})"),
        ("receiver", f"{rx.name} on 127.0.0.1:{rx.port}, sharing the cores with awty"),
        ("homes", f"{workdir} ({fs})"),
    ]


QUICK = dict(cli_calls=5, batch_jobs=5_000, slot_jobs=2_000, requests_jobs=300, flat_due=200,
             flat_pending=20_000, flat_runs=1, catchup_slots=8, catchup_per_slot=200,
             rss_jobs=5_000, runs=1)
FULL = dict(cli_calls=30, batch_jobs=100_000, slot_jobs=10_000, requests_jobs=10_000,
            flat_due=1_000, flat_pending=1_000_000, flat_runs=7, catchup_slots=96,
            catchup_per_slot=1_000, rss_jobs=100_000, runs=3)
SECTIONS = ("cli", "batch", "slot", "flat", "catchup", "rss")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="scripts/bench", description="Measure awty against SPEC 11 and write a report.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="small sizes, one run each (a smoke test; under a minute)")
    p.add_argument("--output", type=Path, default=None,
                   help="Markdown report (default: BENCHMARKS.md in the repository)")
    p.add_argument("--runs", type=int, help="runs per figure (full: 3, quick: 1)")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help=f"comma-separated sections: {','.join(SECTIONS)}")
    p.add_argument("--receiver", choices=("auto", "nginx", "python"), default="auto",
                   help="auto: nginx when installed, else the Python receiver")
    p.add_argument("--receiver-procs", type=int, default=None,
                   help="nginx workers (default 1) or Python receiver processes (default 2)")
    p.add_argument("--loadgen-procs", type=int, default=1,
                   help="load-generator processes for the receiver ceiling")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where temporary homes go (default: .bench/ in the repository)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--section-timeout", type=float, default=None,
                   help="seconds a section may take before it is abandoned as hung "
                        "(default: full 3600, quick 90)")
    p.add_argument("--profile", default=None, metavar="DIR",
                   help="also profile one extra library run of add_many, run_slot, catchup "
                        "and the one big slot into DIR (py-spy when installed, else cProfile; "
                        "not counted in the figures)")
    sizes = p.add_argument_group("sizes (defaults: full run; --quick lowers them)")
    for name, full in FULL.items():
        if name == "runs":
            continue
        sizes.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                           help=f"full {full:,}, quick {QUICK[name]:,}")
    a = p.parse_args(argv)
    base = QUICK if a.quick else FULL
    if a.runs is not None and a.flat_runs is None:
        a.flat_runs = a.runs
    for name, v in base.items():
        if getattr(a, name, None) is None:
            setattr(a, name, v)
    if a.section_timeout is None:
        a.section_timeout = 90 if a.quick else 3600
    a.only = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in a.only if s not in SECTIONS]
    if bad:
        p.error(f"--only: unknown section(s) {', '.join(bad)}")
    if a.runs < 1:
        p.error("--runs must be at least 1")
    a.output = a.output or ROOT / "BENCHMARKS.md"
    return a


def start_receiver(a, workdir: Path) -> Receiver:
    nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
         if os.access(p, os.X_OK)), None)
    if a.receiver == "nginx" and not nginx:
        raise SystemExit("--receiver nginx: nginx is not installed")
    if a.receiver in ("auto", "nginx") and nginx:
        try:
            return NginxReceiver(nginx, workdir, a.receiver_procs or 1)
        except (RuntimeError, OSError) as e:
            if a.receiver == "nginx":
                raise
            print(f"bench: nginx did not start ({e}); using the Python receiver", file=sys.stderr)
    return PythonReceiver(a.receiver_procs or 2)


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    rep = Report(a)
    rep.command = "scripts/bench" + ("" if not argv else " " + shlex.join(argv))
    if not AWTY_SCRIPT.exists():
        print(f"bench: no awty console script at {AWTY_SCRIPT}; run through scripts/bench",
              file=sys.stderr)
        return 2
    base = a.workdir or ROOT / ".bench"
    base.mkdir(parents=True, exist_ok=True)
    workdir = base / f"run-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    workdir.mkdir()
    _PYCACHE[:] = [workdir / "pycache"]
    WORKDIR_FOR_QUIET[:] = [str(workdir)]
    rx: Receiver | None = None
    failed = False
    atexit.register(_stop_children)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    load = Load()
    source0 = _source_hash()
    try:
        rx = start_receiver(a, workdir)
        rep.facts = machine_facts(rx, workdir)
        b = Bench(a, rep, rx, workdir)
        steps: list[tuple[str, Callable[[], None], tuple[str, ...]]] = [
            ("warm-up", b.warm_up, ()),
            ("ceiling", b.ceiling, ("ceiling",)),
            ("cli", b.cli_add, ("add_median", "add_p90")),
            ("batch", b.batch, ("add_many", "add_batch")),
            ("slot", b.slot, ("slot", "bare", "requests", "slot_purge", "slot_raised",
                              "ratio_bare", "ratio_requests")),
            ("flat", b.flat, ("flat0", "flat1", "flat_ratio")),
            ("catchup", b.catchup, ("catchup", "oneslot", "catchup_ratio")),
            ("rss", b.rss, ("rss", "rss_rate")),
        ]
        for name, fn, keys in steps:
            if name not in ("warm-up", "ceiling") and name not in a.only:
                for k in keys:
                    rep.row(k, _SKIPPED_LABELS.get(k, k), "").skipped = True
                continue
            t0 = time.perf_counter()
            print(f"bench: {name} …", file=sys.stderr, flush=True)
            limit = max(1, int(a.section_timeout))
            _alarm(limit)
            # If even the alarm cannot interrupt (a C call that never returns), stop hard:
            # the children die with us (PR_SET_PDEATHSIG).
            faulthandler.dump_traceback_later(limit + 120, exit=True)
            try:
                fn()
            except (Exception, SectionTimeout) as e:  # could not measure: say so, go on
                _alarm(None)
                failed = True
                if isinstance(e, SectionTimeout):
                    where = "".join((_alarm_where or traceback.format_tb(e.__traceback__))
                                    [-8:])
                    msg = f"timed out after {limit} s (hung?)"
                    rep.details.append(f"{name} {msg}; innermost frames:\n\n```\n"
                                       f"{where.rstrip()}\n```")
                    print(f"bench: {name} {msg} in:\n{where}", file=sys.stderr)
                else:
                    msg = f"{type(e).__name__}: {e}"
                    traceback.print_exc()
                for k in keys:
                    if k not in rep.rows:
                        rep.row(k, _SKIPPED_LABELS.get(k, k), "")
                    if not rep.rows[k].values and not rep.rows[k].error:
                        rep.rows[k].error = msg[:200]
                print(f"bench: {name} failed: {msg}", file=sys.stderr)
            finally:
                _alarm(None)
                faulthandler.cancel_dump_traceback_later()
            print(f"bench: {name} took {time.perf_counter() - t0:.1f} s", file=sys.stderr,
                  flush=True)
        if _source_hash() != source0:
            rep.notes.append(
                f"awty's source changed while the bench ran (sha256 of awty/*.py {source0} at "
                f"the start, {_source_hash()} at the end): later sections may have measured "
                f"newer code (CLI subprocesses import it afresh; in-process modules load "
                f"lazily).")
        if rx is not None:
            other = load.other_cores(rx.pids())
            rep.notes.append(
                f"Other load: besides the bench, its receiver and its subprocesses, the machine "
                f"was busy {other:.2f} cores on average during the bench (from /proc/stat"
                f"{'; other engineers share this machine' if other > 0.1 else ''}); load "
                f"average {load.load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.")
    finally:
        if rx is not None:
            rx.stop()
        _stop_children()
        if not a.keep:
            atexit.register(_remove_workdir, workdir, base)  # after the report is written
    if KEPT or REMOVED_AT_ONCE:
        rep.notes.append(
            f"Homes: {len(KEPT)} kept until the end of the bench, {len(REMOVED_AT_ONCE)} removed "
            f"as soon as done with (less than {KEEP_HOMES_FREE / 1e9:.0f} GB free then); "
            "deleting many files just before a timed run makes ext4's inode allocation "
            "CPU-bound for minutes (see `_remove` in scripts/bench.py). A bench started "
            "within five minutes of another one's end pays this in its first figures.")
    if QUIET_WAITS:
        rep.notes.append(f"Waiting for a quiet disk before the {len(QUIET_WAITS)} timed runs "
                         f"took {sum(QUIET_WAITS):.0f} s in all (longest "
                         f"{max(QUIET_WAITS):.1f} s).")
    rep.notes.append(f"Whole bench took {time.perf_counter() - started:.0f} s.")
    missed = [r.label for r in rep.rows.values() if r.met == "NO"]
    if missed:
        rep.notes.append("Missed SPEC 11 targets: " + "; ".join(missed) + ".")
    title = "awty benchmarks (SPEC 11)" + (" — QUICK MODE" if a.quick else "")
    print_table(rep, title)
    write_markdown(rep, a.output, title)
    print(f"bench: wrote {a.output}", file=sys.stderr)
    return 1 if failed else 0


_SKIPPED_LABELS = {
    "add_median": "awty add (CLI) median wall", "add_p90": "awty add (CLI) p90 wall",
    "add_many": "add_many (library)", "add_batch": "add --batch FILE (CLI)",
    "slot": "run-slot end to end (library)", "bare": "bare asyncio+httptools reference",
    "requests": "requests.Session pool reference",
    "slot_purge": "run-slot, then until its retired slot directory is deleted",
    "slot_raised": "run-slot (library), per-host cap raised",
    "ratio_bare": "run-slot / bare reference",
    "ratio_requests": "run-slot / requests reference", "flat0": "flatness: 0 pending",
    "flat1": "flatness: with pending", "flat_ratio": "flatness ratio (pending / none)",
    "catchup": "catch-up", "oneslot": "one slot", "catchup_ratio": "catch-up ratio",
    "rss": "run-slot (CLI) peak RSS", "rss_rate": "run-slot (CLI) throughput",
}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        serve_main(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "_loadgen":
        loadgen_main(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main(sys.argv[1:]))
