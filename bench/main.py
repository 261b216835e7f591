"""The bench's command line and its run: options, the receiver, each section under a time
limit (a hung section is reported and the rest still run), then the table and the report."""

from __future__ import annotations

import argparse
import atexit
import faulthandler
import os
import shlex
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path

from .common import AWTY_SCRIPT, PYCACHE, ROOT, stop_children
from .context import Bench
from .disk import (
    KEEP_HOMES_FREE,
    KEPT,
    QUIET_LIMIT,
    QUIET_WAITS,
    REMOVED_AT_ONCE,
    WORKDIR_FOR_QUIET,
    remove_workdir,
)
from .machine import Load, machine_facts, source_hash
from .receivers import Receiver, start_receiver
from .report import Report, print_table, write_markdown
from .sections import batch, catchup, ceiling, cli, clislot, flat, pg, rss, schedules, serve, slot


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


QUICK = dict(cli_small=1_000, cli_big=5_000, cli_calls=5, batch_jobs=5_000, slot_jobs=2_000,
             requests_jobs=300, flat_due=200,
             flat_pending=20_000, flat_runs=1, catchup_slots=8, catchup_per_slot=200,
             rss_jobs=5_000, sched_fire=2_000, sched_pending=20_000, sched_due=200,
             serve_requests=1_000, serve_batch_jobs=5_000, runs=1)
FULL = dict(cli_small=10_000, cli_big=100_000, cli_calls=30, batch_jobs=100_000,
            slot_jobs=10_000, requests_jobs=10_000,
            flat_due=1_000, flat_pending=1_000_000, flat_runs=7, catchup_slots=96,
            catchup_per_slot=1_000, rss_jobs=100_000, sched_fire=100_000,
            sched_pending=1_000_000, sched_due=1_000, serve_requests=20_000,
            serve_batch_jobs=100_000, runs=3)
SECTIONS = ("cli", "batch", "slot", "clislot", "flat", "catchup", "rss", "pg", "schedules",
            "serve")


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
    p.add_argument("--pg-url", default=None, metavar="URL",
                   help="the PostgreSQL server for the pg section (default: the local server "
                        "on its unix socket or 127.0.0.1:5432, database test; skipped when "
                        "none answers)")
    p.add_argument("--section-timeout", type=float, default=None,
                   help="seconds a section may take before it is abandoned as hung "
                        "(default: full 3600, quick 180)")
    peers = p.add_argument_group(
        "peers", "awty beside APScheduler, Huey, a naive cron + SQL runner and at (each "
        "installed from PyPI into its own venv under the work directory)")
    peers.add_argument("--peers", action="store_true",
                       help="measure the peers instead of the SPEC 11 figures; writes the "
                            "'awty beside the alternatives' section of the report")
    peers.add_argument("--peers-jobs", type=int, default=None,
                       help="jobs due at once (full 10,000, quick 300)")
    peers.add_argument("--peers-rounds", type=int, default=None,
                       help="interleaved rounds (full 3, quick 1)")
    peers.add_argument("--peers-timeout", type=float, default=None,
                       help="seconds each step of a peer run may take (full 600, quick 120)")
    peers.add_argument("--peers-only",
                       default="awty,awtypostgres,procrastinate,naive,apscheduler,huey,at",
                       help="comma-separated peers: awty,awtypostgres,procrastinate,naive,"
                            "apscheduler,huey,at")
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
    a.peers_jobs = a.peers_jobs or (300 if a.quick else 10_000)
    a.peers_rounds = a.peers_rounds or (1 if a.quick else 3)
    a.peers_timeout = a.peers_timeout or (120 if a.quick else 600)
    a.peers_only = [s.strip() for s in a.peers_only.split(",") if s.strip()]
    if a.section_timeout is None:
        a.section_timeout = 180 if a.quick else 3600
    a.only = [s.strip() for s in a.only.split(",") if s.strip()]
    bad = [s for s in a.only if s not in SECTIONS]
    if bad:
        p.error(f"--only: unknown section(s) {', '.join(bad)}")
    if a.runs < 1:
        p.error("--runs must be at least 1")
    a.output = a.output or ROOT / "BENCHMARKS.md"
    return a


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
    PYCACHE[:] = [workdir / "pycache"]
    if a.peers:
        return _peers(a, argv, base, workdir)
    WORKDIR_FOR_QUIET[:] = [str(workdir)]
    QUIET_LIMIT[:] = [2.0 if a.quick else 30.0]
    rx: Receiver | None = None
    b: Bench | None = None
    failed = False
    atexit.register(stop_children)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    load = Load()
    source0 = source_hash()
    try:
        rx = start_receiver(a, workdir)
        rep.facts = machine_facts(rx, workdir)
        b = Bench(a, rep, rx, workdir)
        steps: list[tuple[str, Callable[[], None], tuple[str, ...]]] = [
            ("warm-up", b.warm_up, ()),
            ("ceiling", partial(ceiling.run, b), ("ceiling",)),
            ("cli", partial(cli.run, b), ("add_median", "add_p90", "add_pass")),
            ("batch", partial(batch.run, b), ("add_many", "add_batch", "add_bare",
                                              "add_many_bare", "add_batch_bare")),
            ("slot", partial(slot.run, b), ("slot", "bare", "requests", "slot_purge",
                                            "slot_raised", "ratio_bare", "ratio_requests")),
            ("clislot", partial(clislot.run, b), (
                f"cli_first_{a.cli_small}", f"cli_last_{a.cli_small}", f"cli_first_{a.cli_big}",
                f"cli_last_{a.cli_big}", "cli_rate", "cli_bare", "cli_bare_stamps",
                "cli_ratio")),
            ("flat", partial(flat.run, b), ("flat0", "flat1", "flat_ratio", "flat_last0",
                                            "flat_last1", "flat_last_ratio", "flat_cancel")),
            ("catchup", partial(catchup.run, b), ("catchup", "oneslot", "catchup_ratio")),
            ("rss", partial(rss.run, b), ("rss", "rss_rate")),
            ("pg", partial(pg.run, b), pg.KEYS),
            ("schedules", partial(schedules.run, b), schedules.KEYS),
            ("serve", partial(serve.run, b), serve.KEYS),
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
        if source_hash() != source0:
            rep.notes.append(
                f"awty's source changed while the bench ran (sha256 of awty/*.py {source0} at "
                f"the start, {source_hash()} at the end): later sections may have measured "
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
        if b is not None:
            b.stop()
        if rx is not None:
            rx.stop()
        stop_children()
        if not a.keep:
            atexit.register(remove_workdir, workdir, base)  # after the report is written
    if KEPT or REMOVED_AT_ONCE:
        rep.notes.append(
            f"Homes: {len(KEPT)} kept until the end of the bench, {len(REMOVED_AT_ONCE)} removed "
            f"as soon as done with (less than {KEEP_HOMES_FREE / 1e9:.0f} GB free then); "
            "deleting many files just before a timed run makes ext4's inode allocation "
            "CPU-bound for minutes (see `remove_home` in bench/disk.py). A bench started "
            "within five minutes of another one's end pays this in its first figures.")
    if QUIET_WAITS:
        rep.notes.append(f"Waiting for a quiet disk before the {len(QUIET_WAITS)} timed runs "
                         f"took {sum(QUIET_WAITS):.0f} s in all (longest "
                         f"{max(QUIET_WAITS):.1f} s).")
    rep.notes.append(f"Whole bench took {time.perf_counter() - started:.0f} s.")
    missed = [r for r in rep.rows.values() if r.met == "NO"]
    if missed:
        rep.notes.append("Missed SPEC 11 targets: " + "; ".join(r.label for r in missed) + ".")
        rep.missed = [(r.key, r.label) for r in missed]
    title = "awty benchmarks (SPEC 11)" + (" — QUICK MODE" if a.quick else "")
    print_table(rep, title)
    write_markdown(rep, a.output, title)
    print(f"bench: wrote {a.output}", file=sys.stderr)
    return 1 if failed else 0


def _peers(a: argparse.Namespace, argv: list[str], base: Path, workdir: Path) -> int:
    """``--peers``: the peers' table instead of the SPEC 11 figures."""
    import subprocess

    from .peers import run_peers
    from . import kept
    from .peers import table

    atexit.register(stop_children)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        walls = []
        for _ in range(6):  # the first warms the cache
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            walls.append((time.perf_counter() - t0) * 1000)
        pass_ms = sorted(walls[1:])[2]
        load = Load()
        figs, rx, took = run_peers(a, workdir, base / "peers-venv")
        busy = (f"besides the bench and its processes the machine was busy "
                f"{load.other_cores(rx.pids()):.2f} cores on average (load average "
                f"{load.load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)")
        rx.stop()
    finally:
        stop_children()
        if not a.keep:
            remove_workdir(workdir, base)
    table.print_table(figs, a.peers_jobs)
    kept.write(a.output, "peers", table.markdown(figs, a, rx.name, took, pass_ms, busy))
    print(f"bench: wrote the peers' section of {a.output}", file=sys.stderr)
    return 1 if any(f.failures for f in figs) else 0


_SKIPPED_LABELS = {
    "add_median": "awty add (CLI) median wall", "add_p90": "awty add (CLI) p90 wall",
    "add_pass": "awty add (CLI) / python -c pass",
    "add_many": "add_many (library)", "add_batch": "add --batch FILE (CLI)",
    "add_bare": "bare SQLite executemany, same rows", "add_many_bare": "add_many / bare",
    "add_batch_bare": "add --batch / bare",
    "slot": "run-slot end to end (library)", "bare": "bare asyncio+httptools reference",
    "requests": "requests.Session pool reference",
    "slot_purge": "run-slot, then until its retired slot directory is deleted",
    "slot_raised": "run-slot (library), per-host cap raised",
    "ratio_bare": "run-slot / bare reference",
    "ratio_requests": "run-slot / requests reference", "flat0": "flatness: 0 pending",
    "flat1": "flatness: with pending", "flat_ratio": "flatness ratio (pending / none)",
    "catchup": "catch-up", "oneslot": "one slot", "catchup_ratio": "catch-up ratio",
    "rss": "run-slot (CLI) peak RSS", "rss_rate": "run-slot (CLI) throughput",
    "cli_rate": "run-slot (CLI) end to end", "cli_bare": "bare asyncio+httptools, same run",
    "cli_bare_stamps": "bare asyncio+httptools, same run (timing receiver)",
    "cli_ratio": "run-slot (CLI) / bare", "flat_last0": "flatness due → last: 0 pending",
    "flat_last1": "flatness due → last: with pending",
    "flat_last_ratio": "flatness ratio, due → last callback",
    "flat_cancel": "cancel --entity order --key K, with pending",
    **pg.LABELS,
    **schedules.LABELS,
}
