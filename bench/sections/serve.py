"""Section 9: ``awty serve`` (issue 33): one serve process on this machine, a load generator
beside it (asyncio on uvloop, keep-alive connections, one request in flight each):
``POST /v1/jobs`` requests/s and p50/p99 latency, and ``POST /v1/jobs/batch`` jobs/s, on
SQLite and (when a server answers) PostgreSQL, a schema of its own dropped at the end.

Alone: ``python -m bench.sections.serve --requests 3000 --batch-jobs 20000``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common import AWTY_SCRIPT, die_with_parent, fmt_n

if TYPE_CHECKING:
    from ..context import Bench

CONNECTIONS = 32
BATCH = 1000  # jobs per POST /v1/jobs/batch
KEYS = ("serve_add", "serve_add_p99", "serve_batch", "pg_serve_add", "pg_serve_add_p99",
        "pg_serve_batch")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A home, a token and ``awty serve`` on it (SQLite, or PostgreSQL with ``pg_url``);
    ``tree``: the awty of another checkout (bench/servecpu.py's A/B), else this one's."""

    def __init__(self, workdir: Path, pg_url: str | None, tree: Path | None = None) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="serve-", dir=workdir))
        self.env = {**os.environ}
        self.awty = [str(AWTY_SCRIPT)]
        if tree is not None:
            self.awty = [sys.executable, "-P", "-m", "awty"]  # -P: not the cwd's awty
            self.env["PYTHONPATH"] = str(tree)
        self.schema = None
        if pg_url:
            self.schema = f"bench_{uuid.uuid4().hex[:8]}"
            self.env.update(AWTY_DATABASE_URL=pg_url, AWTY_DATABASE_SCHEMA=self.schema)
        self.pg_url = pg_url
        self._cli("init")
        self.token = self._cli("token", "new", "bench", "--scope", "jobs:write").strip()
        self.port = _port()
        self.proc = subprocess.Popen(
            [*self.awty, "--home", str(self.home), "serve", "--port", str(self.port)],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("awty serve did not listen within 30 s")

    def _cli(self, *args: str) -> str:
        p = subprocess.run([*self.awty, "--home", str(self.home), *args], env=self.env,
                           capture_output=True, text=True, timeout=120)
        if p.returncode:
            raise RuntimeError(f"awty {args[0]}: {p.stderr.strip()}")
        return p.stdout

    def pending(self) -> int:
        return int(json.loads(self._cli("stats", "--json"))["pending"]["total"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.schema:
            import psycopg

            with psycopg.connect(self.pg_url, autocommit=True) as c:
                c.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        shutil.rmtree(self.home, ignore_errors=True)


def _request(port: int, token: str, path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def _connection(port: int, bodies: list[bytes], path: str, token: str,
                      latencies: list[float], statuses: dict[int, int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while bodies:
            req = _request(port, token, path, bodies.pop())
            t0 = time.perf_counter()
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - t0)
            status = int(head[9:12])
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()


def load(port: int, token: str, path: str, bodies: list[bytes],
         connections: int = CONNECTIONS) -> dict[str, Any]:
    """Send every body (``connections`` at a time); seconds, latencies and statuses."""
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    async def main() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(_connection(port, bodies, path, token, latencies, statuses)
                               for _ in range(connections)))
        return time.perf_counter() - t0

    seconds = runner(main())
    return {"seconds": seconds, "latencies": sorted(latencies), "statuses": statuses}


def _p(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(workdir: Path, pg_url: str | None, requests: int, batch_jobs: int,
            target: str) -> dict[str, float]:
    """One serve process: ``requests`` single POSTs, then ``batch_jobs`` in batches."""
    s = Served(workdir, pg_url)
    try:
        one = json.dumps({"target": target, "in": "2h", "payload": {"n": 1}}).encode()
        load(s.port, s.token, "/v1/jobs", [one] * min(200, requests))  # warm-up
        single = load(s.port, s.token, "/v1/jobs", [one] * requests)
        assert single["statuses"] == {201: requests}, single["statuses"]
        lines = [json.dumps({"target": target, "in": f"{1 + i % 20}h", "entity": "b",
                             "key": str(i)}) for i in range(batch_jobs)]
        bodies = [("[" + ",".join(lines[i:i + BATCH]) + "]").encode()
                  for i in range(0, batch_jobs, BATCH)]
        batch = load(s.port, s.token, "/v1/jobs/batch", bodies, connections=4)
        assert batch["statuses"] == {201: len(range(0, batch_jobs, BATCH))}, batch["statuses"]
        assert s.pending() == batch_jobs + requests + min(200, requests)
        lat = single["latencies"]
        return {"add": requests / single["seconds"], "add_p50_ms": _p(lat, 0.5) * 1000,
                "add_p99_ms": _p(lat, 0.99) * 1000, "batch": batch_jobs / batch["seconds"]}
    finally:
        s.stop()


def run(b: Bench) -> None:
    from .pg import server_url

    n, jobs = b.a.serve_requests, b.a.serve_batch_jobs
    target = "http://127.0.0.1:9/serve"  # never fired here: only adding is measured
    for prefix, url in (("", None), ("pg_", server_url(b.a.pg_url))):
        store = "PostgreSQL" if prefix else "SQLite"
        ra = b.rep.row(prefix + "serve_add", f"{store}: POST /v1/jobs, one serve process, "
                       f"{CONNECTIONS} connections", "requests/s", "≥ 2,000 requests/s",
                       lambda v: v >= 2000)
        rp = b.rep.row(prefix + "serve_add_p99", f"{store}: POST /v1/jobs p99", "ms",
                       "≤ 25 ms", lambda v: v <= 25, fmt="{:.1f}")
        rb = b.rep.row(prefix + "serve_batch", f"{store}: POST /v1/jobs/batch ({fmt_n(BATCH)}"
                       " a request)", "jobs/s", "≥ 30,000 jobs/s", lambda v: v >= 30_000)
        if prefix and url is None:
            for r in (ra, rp, rb):
                r.skipped = True
            continue
        for _ in range(b.a.runs):
            got = measure(b.workdir, url, n, jobs, target)
            ra.values.append(got["add"])
            rp.values.append(got["add_p99_ms"])
            rb.values.append(got["batch"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sections.serve")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--batch-jobs", type=int, default=20_000)
    ap.add_argument("--pg-url", default=None)
    a = ap.parse_args(argv)
    from .pg import server_url

    work = Path(tempfile.mkdtemp(prefix="awty-bench-serve-"))
    try:
        for store, url in (("SQLite", None), ("PostgreSQL", server_url(a.pg_url))):
            if store == "PostgreSQL" and url is None:
                print("PostgreSQL: no server answers; skipped")
                continue
            got = measure(work, url, a.requests, a.batch_jobs, "http://127.0.0.1:9/serve")
            print(f"{store}: POST /v1/jobs {got['add']:,.0f} requests/s (p50 "
                  f"{got['add_p50_ms']:.1f} ms, p99 {got['add_p99_ms']:.1f} ms, "
                  f"{a.requests:,} requests, {CONNECTIONS} connections); POST /v1/jobs/batch "
                  f"{got['batch']:,.0f} jobs/s ({a.batch_jobs:,} jobs, {BATCH:,} a request)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
