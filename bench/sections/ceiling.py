"""Section 0: the receiver's own ceiling, measured first with a light load generator (run as
``python bench _loadgen PORT SECONDS CONNECTIONS``, a process of its own)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from ..common import BENCH_DIR, CHILDREN, PATH, die_with_parent, new_loop, proc_cpu

if TYPE_CHECKING:
    from ..context import Bench
    from ..receivers import Receiver

BENCH = BENCH_DIR


def run(b: Bench) -> None:
    r = b.rep.row("ceiling", "receiver ceiling (its own max, load generator)", "req/s")
    seconds = 0.7 if b.a.quick else 3.0
    for _ in range(1 if b.a.quick else 3):
        rate, cores = measure_ceiling(b.rx, seconds, b.a.loadgen_procs, 256)
        r.values.append(rate)
    b.rep.notes.append(
        f"Receiver: {b.rx.name}. Its ceiling was measured first with "
        f"{b.a.loadgen_procs} light load-generator process(es) (256 keep-alive "
        f"connections, one request in flight each, no response parsing) on the same "
        f"{os.cpu_count()} cores, so it is a lower bound. The receiver competes with awty "
        f"for these {os.cpu_count()} cores in every figure below.")
    b.rep.notes.append(
        "Before every timed run the bench waits for awty's background removals, calls "
        "sync() and then waits (up to 30 s) until the disk has had no I/O for 0.5 s, so "
        "that no run pays for the disk work (writes, discards of deleted files) of the "
        "homes filled or removed before it.")


def sample_request(port: int) -> bytes:
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
    req = sample_request(port)
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

    loop = new_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


def measure_ceiling(rx: Receiver, seconds: float, procs: int, conns: int) -> tuple[float, float]:
    """The receiver's ceiling (req/s) with ``procs`` load-generator processes; and the
    receiver's CPU use meanwhile (cores)."""
    cpu0 = proc_cpu(rx.pids())
    gens = [subprocess.Popen([sys.executable, str(BENCH), "_loadgen", str(rx.port), str(seconds),
                              str(conns)], stdout=subprocess.PIPE, text=True,
                             preexec_fn=die_with_parent) for _ in range(procs)]
    CHILDREN.extend(gens)
    t0 = time.perf_counter()
    rate = 0.0
    for g in gens:
        out, _ = g.communicate(timeout=seconds + 60)
        d = json.loads(out.strip().splitlines()[-1])
        rate += d["requests"] / d["seconds"]
    cores = (proc_cpu(rx.pids()) - cpu0) / (time.perf_counter() - t0)
    return rate, cores
