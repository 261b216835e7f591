"""CPU per request of one ``awty serve`` process (a loaded machine's wall throughput is
noise; the serve process's own user+system CPU over N requests is not): the serve section's
server and load generator, the server's utime+stime read from /proc before and after.

``python -m bench.servecpu --requests 3000 --batch-jobs 20000 [--pg-url URL]``: prints
CPU ms per ``POST /v1/jobs`` and per job of ``POST /v1/jobs/batch``, and the bound they put
on one core's throughput (1 / CPU per request); of it, the event loop's (the main thread: HTTP,
parsing, answers), the rest being the store's thread (the adds).

``--base DIR`` (another checkout, e.g. a worktree of main): an interleaved A/B, each run
measuring DIR's serve ("A") and this tree's ("B") in turn, the order swapped every run."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from .sections.serve import BATCH, Served, load

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and its threads (seconds)."""
    user, system = cpu_split(pid)
    return user + system


def cpu_split(pid: int) -> tuple[float, float]:
    """utime and stime of ``pid`` and its threads (seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def loop_seconds(pid: int) -> float:
    """utime + stime of ``pid``'s main thread alone: serve's event loop (the store's work is
    on threads of its own)."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def measure(work: Path, pg_url: str | None, requests: int, batch_jobs: int,
            tree: Path | None = None) -> dict[str, float]:
    s = Served(work, pg_url, tree)
    target = "http://127.0.0.1:9/serve"
    try:
        one = json.dumps({"target": target, "in": "2h", "payload": {"n": 1}}).encode()
        load(s.port, s.token, "/v1/jobs", [one] * 300)  # warm-up
        u0, s0 = cpu_split(s.proc.pid)
        l0 = loop_seconds(s.proc.pid)
        single = load(s.port, s.token, "/v1/jobs", [one] * requests)
        u1, s1 = cpu_split(s.proc.pid)
        l1 = loop_seconds(s.proc.pid)
        c0, c1 = u0 + s0, u1 + s1
        assert single["statuses"] == {201: requests}, single["statuses"]
        lines = [json.dumps({"target": target, "in": f"{1 + i % 20}h", "entity": "b",
                             "key": str(i)}) for i in range(batch_jobs)]
        bodies = [("[" + ",".join(lines[i:i + BATCH]) + "]").encode()
                  for i in range(0, batch_jobs, BATCH)]
        c2, l2 = cpu_seconds(s.proc.pid), loop_seconds(s.proc.pid)
        batch = load(s.port, s.token, "/v1/jobs/batch", bodies, connections=4)
        c3, l3 = cpu_seconds(s.proc.pid), loop_seconds(s.proc.pid)
        assert set(batch["statuses"]) == {201}, batch["statuses"]
        lat = single["latencies"]
        return {"add_cpu_ms": (c1 - c0) * 1000 / requests,
                "add_sys_ms": (s1 - s0) * 1000 / requests,
                "add_loop_ms": (l1 - l0) * 1000 / requests,
                "batch_loop_us": (l3 - l2) * 1e6 / batch_jobs,
                "batch_cpu_us": (c3 - c2) * 1e6 / batch_jobs,
                "add_wall": requests / single["seconds"],
                "p99_ms": lat[int(0.99 * len(lat))] * 1000,
                "batch_wall": batch_jobs / batch["seconds"]}
    finally:
        s.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.servecpu")
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--batch-jobs", type=int, default=20_000)
    ap.add_argument("--pg-url", default=None)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--base", type=Path, default=None,
                    help="another checkout: interleaved A (it) / B (this tree)")
    ap.add_argument("--stores", default="sqlite,pg")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="awty-servecpu-"))
    trees: list[tuple[str, Path | None]] = [("", None)]
    if a.base is not None:
        trees = [("A ", a.base.resolve()), ("B ", None)]
    try:
        for run in range(a.runs):
            for store, url in (("SQLite", None), ("PostgreSQL", a.pg_url)):
                if (store == "PostgreSQL" and url is None
                        or ("pg" if url else "sqlite") not in a.stores.split(",")):
                    continue
                for label, tree in trees[::-1] if run % 2 else trees:
                    g = measure(work, url, a.requests, a.batch_jobs, tree)
                    print(f"{label}{store}: POST /v1/jobs {g['add_cpu_ms']:.3f} ms CPU a "
                          "request "
                          f"({g['add_sys_ms']:.3f} system, {g['add_loop_ms']:.3f} event loop) "
                          f"(one core: {1000 / g['add_cpu_ms']:,.0f}/s; wall here "
                          f"{g['add_wall']:,.0f}/s, p99 {g['p99_ms']:.1f} ms); batch "
                          f"{g['batch_cpu_us']:.1f} us CPU a job ({g['batch_loop_us']:.1f} event "
                          f"loop; one core: "
                          f"{1e6 / g['batch_cpu_us']:,.0f} jobs/s; wall {g['batch_wall']:,.0f})",
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
