"""The PostgreSQL store's own figures, at store level (no HTTP): what the database side costs.

    .venv/bin/python -m bench.pgstore                       # local server, full sizes
    .venv/bin/python -m bench.pgstore --quick               # small sizes, ~1 minute
    .venv/bin/python -m bench.pgstore --url postgresql://… --json

Figures (median of ``--runs``):
  * ``add``: jobs/s through ``Store.add`` (COPY), in batches of 1,000 and 10,000;
  * ``cycle``: jobs/s through claim + start + finish (each job ended with one execution
    recorded), batches of 1,000, one slot of ``--slot-jobs`` jobs;
  * ``flat``: the same cycle with ``--background`` pending rows in other slots, and its ratio
    to the empty-table cycle (target ≤ 1.2×);
  * ``two_vs_one``: 2 processes draining one slot together (SKIP LOCKED) against 1.

Each run uses a fresh schema (``bench_<random>``) in the given database, dropped afterwards.
``measure()`` returns the figures as a dict, for the main bench to include.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

from awty.ids import new_id
from awty.model import Answer, End, Execution, Job, Kind, Outcome, Result

SLOT = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NOW = SLOT + timedelta(seconds=3)
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _jobs(n: int, slot: datetime) -> list[Job]:
    base = SLOT - timedelta(days=1)
    return [Job(id=new_id(base + timedelta(microseconds=i)), kind=Kind.HTTP,
                target="http://127.0.0.1:9/cb", payload_json='{"order": 42}', headers={},
                entity_name="order", entity_key=str(i), first_check_at=slot, next_check_at=slot,
                created_at=base, updated_at=base) for i in range(n)]


class _Schema:
    """A fresh schema for one measurement, dropped on exit."""

    def __init__(self, url: str):
        self.url, self.name = url, f"bench_{uuid.uuid4().hex[:8]}"

    def __enter__(self):
        from awty import store

        self.store = store.open(store.StoreSpec("postgres", self.url, self.name), mode="init")
        return self.store

    def __exit__(self, *exc) -> None:
        import psycopg

        self.store.close()
        with psycopg.connect(self.url, autocommit=True) as c:
            c.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')


def _vacuum(url: str, schema: str) -> None:
    # Autovacuum may be off on the server: statistics after a bulk load are the app's job here.
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        for table in ("future_job", "job_history", "job_execution"):
            c.execute(f'VACUUM ANALYZE "{schema}".{table}')


def add_rate(url: str, n: int, batch: int) -> float:
    jobs = _jobs(n, SLOT)
    with _Schema(url) as store:
        t = time.perf_counter()
        for i in range(0, n, batch):
            chunk = jobs[i:i + batch]
            store.add(chunk, [None] * len(chunk))
        return n / (time.perf_counter() - t)


def _fill(store, n: int, slot_of, batch: int = 10_000) -> None:
    base = SLOT - timedelta(days=2)
    for i in range(0, n, batch):
        chunk = [Job(id=new_id(base + timedelta(microseconds=k)), kind=Kind.HTTP,
                     target="http://127.0.0.1:9/cb", payload_json="{}", headers={},
                     entity_name=None, entity_key=None, first_check_at=slot_of(k),
                     next_check_at=slot_of(k)) for k in range(i, min(n, i + batch))]
        store.add(chunk, [None] * len(chunk))


def cycle_rate(store, n: int, batch: int = 1000, owner: str = "bench:1:x") -> float:
    """Claim, start and finish one slot of ``n`` jobs; jobs/s."""
    with store.owner_session(owner):
        t = time.perf_counter()
        done = 0
        while True:
            got = store.claim(SLOT, now=NOW, owner=owner, lease_until=NOW + timedelta(minutes=10),
                              limit=batch)
            if not got:
                break
            started = store.start([j.id for j in got], owner=owner, now=NOW)
            result = Result(Answer.DONE, status=204, duration=0.002)
            ends = [End(j, Outcome.DONE, "ok", result, lateness=3.0) for j in got]
            runs = [Execution(j.id, NOW, "202611221000", 1, 1, Answer.DONE, 204, 2.0, 3000.0)
                    for j in got]
            store.finish(ends, owner=owner, now=NOW, executions=runs)
            done += len(started)
        elapsed = time.perf_counter() - t
    assert done == n, (done, n)
    return n / elapsed


def flat_pair(url: str, n: int, background: int, runs: int) -> tuple[list[float], list[float]]:
    """The cycle on an empty table and on one holding ``background`` pending rows in other
    slots, alternated run by run so that both see the same machine load."""
    empty, full = [], []
    with _Schema(url) as bare, _Schema(url) as loaded:
        # Pending work spread over the next 10,000 slots, none in the measured one.
        _fill(loaded, background, lambda k: SLOT + timedelta(minutes=15 * (1 + k % 10_000)))
        for _ in range(runs):
            for store, out in ((bare, empty), (loaded, full)):
                store.add(_jobs(n, SLOT), [None] * n)
                _vacuum(url, store.schema)
                out.append(cycle_rate(store, n))
    return empty, full


def _drain(url: str, schema: str, owner: str, start_at: float) -> int:
    from awty import store as store_mod

    store = store_mod.open(store_mod.StoreSpec("postgres", url, schema))
    time.sleep(max(0.0, start_at - time.time()))  # every process starts together
    with store.owner_session(owner):
        done = 0
        while got := store.claim(SLOT, now=NOW, owner=owner,
                                 lease_until=NOW + timedelta(minutes=10), limit=1000):
            store.start([j.id for j in got], owner=owner, now=NOW)
            result = Result(Answer.DONE, status=204, duration=0.002)
            store.finish([End(j, Outcome.DONE, "ok", result) for j in got], owner=owner, now=NOW)
            done += len(got)
    store.close()
    return done


def parallel(url: str, n: int, procs: int) -> float:
    """``procs`` processes sharing one slot of ``n`` jobs (SKIP LOCKED); jobs/s, wall clock."""
    import multiprocessing

    with _Schema(url) as store:
        store.add(_jobs(n, SLOT), [None] * n)
        _vacuum(url, store.schema)
        start_at = time.time() + 1.0
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(procs) as pool:
            done = pool.starmap(_drain, [(url, store.schema, f"bench:{i}:p", start_at)
                                         for i in range(procs)])
        elapsed = time.time() - start_at
    assert sum(done) == n, (done, n)
    return n / elapsed


def _summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _median(fn, runs: int) -> dict:
    return _summary([fn() for _ in range(runs)])


def measure(url: str = DEFAULT_URL, *, quick: bool = False, runs: int = 3,
            slot_jobs: int | None = None, background: int | None = None) -> dict:
    runs = 1 if quick else runs
    add_n = 20_000 if quick else 100_000
    slot_jobs = slot_jobs or (5_000 if quick else 20_000)
    background = background if background is not None else (100_000 if quick else 1_000_000)
    empty, full = flat_pair(url, slot_jobs, background, runs)
    out = {
        "add_1000": _median(lambda: add_rate(url, add_n, 1000), runs),
        "add_10000": _median(lambda: add_rate(url, add_n, 10_000), runs),
        "cycle": _summary(empty),
        "cycle_background": _summary(full),
        "one_process": _median(lambda: parallel(url, slot_jobs, 1), runs),
        "two_processes": _median(lambda: parallel(url, slot_jobs, 2), runs),
        "sizes": {"add": add_n, "slot_jobs": slot_jobs, "background": background},
    }
    # Per run, then the median: each pair ran under the same load.
    out["flat_ratio"] = statistics.median(e / f for e, f in zip(empty, full, strict=True))
    out["two_vs_one"] = out["two_processes"]["median"] / out["one_process"]["median"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pgstore", description=__doc__.split("\n")[0])
    p.add_argument("--url", default=DEFAULT_URL)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--slot-jobs", type=int)
    p.add_argument("--background", type=int)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    r = measure(a.url, quick=a.quick, runs=a.runs, slot_jobs=a.slot_jobs, background=a.background)
    if a.json:
        print(json.dumps(r, indent=2))
        return 0
    s = r["sizes"]
    for name, label in (("add_1000", f"add {s['add']:,} jobs, batches of 1,000"),
                        ("add_10000", f"add {s['add']:,} jobs, batches of 10,000"),
                        ("cycle", f"claim+start+finish, slot of {s['slot_jobs']:,}"),
                        ("cycle_background", f"same, {s['background']:,} other pending rows"),
                        ("one_process", "claim+start+finish, 1 process (no executions)"),
                        ("two_processes", "same, 2 processes sharing the slot")):
        m = r[name]
        print(f"{label:<55} {m['median']:>10,.0f} jobs/s  "
              f"(min {m['min']:,.0f}, max {m['max']:,.0f})")
    print(f"{'flatness (empty / with background)':<55} {r['flat_ratio']:>10.2f}x")
    print(f"{'2 processes / 1 process':<55} {r['two_vs_one']:>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
