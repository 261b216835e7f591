"""The peers' run: install each peer, then rounds of (schedule N jobs, fire them, read the
receiver), every step under a time limit; a peer that cannot finish is reported as such."""

from __future__ import annotations

import math
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..common import fmt_n
from ..stamps import StampReceiver
from .kinds import PEERS, Peer, Run

ONE_CALLS = 5  # timed `one` calls per peer (after one untimed)


@dataclass
class Figures:
    """One peer's measurements over the rounds (one value per finished run)."""

    peer: Peer
    rate: list[float] = field(default_factory=list)  # callbacks/s, first → last arrival
    first: list[float] = field(default_factory=list)  # s, due → first arrival
    last: list[float] = field(default_factory=list)  # s, due → last arrival
    dups: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    scheduled: list[float] = field(default_factory=list)  # jobs/s
    one_ms: list[float] = field(default_factory=list)
    signed: bool | None = None
    skipped: str | None = None
    failures: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def log(msg: str) -> None:
    print(f"bench: peers: {msg}", file=sys.stderr, flush=True)


def run_peers(a, workdir: Path, venvs: Path) -> tuple[list[Figures], StampReceiver, float]:
    n, rounds = a.peers_jobs, a.peers_rounds
    rx = StampReceiver()
    figs = []
    for cls in PEERS:
        peer = cls(venvs, workdir, getattr(a, "pg_url", None))
        f = Figures(peer)
        figs.append(f)
        if cls.__name__.lower() not in a.peers_only:
            f.skipped = "not in --peers-only"
        elif reason := peer.unavailable():
            f.skipped = reason
            log(f"skipping {peer.name}: {reason}")
        else:
            try:
                peer.install(log)
            except Exception as e:  # no network, a failed build: say so, measure the others
                f.skipped = f"could not install: {type(e).__name__}: {str(e)[:150]}"
                log(f"skipping {peer.name}: {f.skipped}")
    live = [f for f in figs if not f.skipped]
    t0 = time.perf_counter()
    try:
        for f in live:
            _one_calls(f, rx, workdir, a.peers_timeout)
        for rnd in range(rounds):
            order = live[rnd % len(live):] + live[:rnd % len(live)] if live else []
            for f in order:
                if len(f.failures) >= 2:  # it failed twice: spend no more time on it
                    continue
                _fire(f, rx, workdir, n, rnd, a.peers_timeout)
    finally:
        if rx.proc.poll() is not None:
            log("the timing receiver died")
    return figs, rx, time.perf_counter() - t0


def _fresh(workdir: Path, f: Figures, tag: str) -> Path:
    d = workdir / f"peer-{f.peer.key}-{tag}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def _one_calls(f: Figures, rx: StampReceiver, workdir: Path, timeout: float) -> None:
    r = Run(_fresh(workdir, f, "one"), 1, rx.url())
    try:
        for i in range(ONE_CALLS + 1):
            wall = f.peer.one(r, timeout)
            if i:
                f.one_ms.append(wall * 1000)
    except Exception as e:
        f.failures.append(f"one call: {type(e).__name__}: {str(e)[:200]}")
        log(f"{f.peer.name}: one call failed: {e}")
    finally:
        f.peer.cleanup(r)
        shutil.rmtree(r.d, ignore_errors=True)


def _due_for(peer: Peer, est: float) -> float:
    """When a daemon peer's jobs fall due: after scheduling them (``est`` s) and starting the
    daemon have surely finished; atd only knows minutes."""
    due = time.time() + est
    if peer.key == "at":
        due = math.ceil(due / 60) * 60
    return due


def _pilot_estimate(f: Figures, workdir: Path, rx: StampReceiver, n: int, timeout: float
                    ) -> float:
    """Seconds a peer will take to schedule ``n`` jobs, from a small untimed pilot (due in an
    hour, then dropped) less its start-up (one call's time): how far ahead its first run's
    jobs must be due."""
    k = min(n, 300)
    r = Run(_fresh(workdir, f, "pilot"), k, rx.url(), due=time.time() + 3600)
    try:
        wall = f.peer.schedule(r, timeout)
    finally:
        f.peer.cleanup(r)
        shutil.rmtree(r.d, ignore_errors=True)
    start = statistics.median(f.one_ms) / 1000 if f.one_ms else 0.0
    return start + max(wall - start, 0.05 * wall) / k * n


def _fire(f: Figures, rx: StampReceiver, workdir: Path, n: int, rnd: int,
          timeout: float) -> None:
    peer = f.peer
    r = Run(_fresh(workdir, f, f"r{rnd + 1}"), n, rx.url())
    what = f"{peer.name} round {rnd + 1}"
    try:
        if peer.kind == "daemon":
            # scheduling time, with room: the last measured one, else a generous guess
            est = n / statistics.median(f.scheduled) if f.scheduled else \
                _pilot_estimate(f, workdir, rx, n, timeout)
            r.due = _due_for(peer, est * 1.5 + 5)
        else:
            r.due = time.time()  # due when cron starts the runner, right after scheduling
        log(f"{what}: scheduling {fmt_n(n)} jobs")
        wall = peer.schedule(r, timeout)
        f.scheduled.append(n / wall)
        rx.reset()
        if peer.kind == "daemon":
            peer.start(r)
            if time.time() > r.due - 0.5:
                raise RuntimeError(f"scheduling took {wall:.1f} s: past the due time it was "
                                   f"given (the run would measure its start-up)")
            due = r.due
            log(f"{what}: due in {due - time.time():.1f} s")
        else:
            due = time.time()  # cron starts it now
            peer.start(r)
        wait = max(0.0, due - time.time()) + timeout
        s = rx.wait(n, wait, quiet=1.0)
        if s.distinct < n:
            got = f"{fmt_n(s.distinct)} of {fmt_n(n)} callbacks"
            f.failures.append(f"round {rnd + 1}: did not finish: {got} after {wait:.0f} s")
            log(f"{what}: did not finish ({got})")
            f.details.append(f"{what}: did not finish: {got} in {wait:.0f} s")
            return
        if s.signed != s.posts:
            f.signed = False
        elif f.signed is None:
            f.signed = True
        f.first.append(s.first - due)
        f.last.append(s.last - due)
        f.rate.append(s.distinct / max(1e-6, s.last - s.first))
        f.dups.append(s.dups)
        f.missing.append(n - s.distinct)
        f.details.append(
            f"{what}: scheduled in {wall:.2f} s; due → first {s.first - due:.3f} s, → last "
            f"{s.last - due:.2f} s; {fmt_n(s.posts)} posts, {fmt_n(s.dups)} duplicates")
        log(f"{what}: due → last {s.last - due:.2f} s")
    except Exception as e:
        f.failures.append(f"round {rnd + 1}: {type(e).__name__}: {str(e)[:200]}")
        f.details.append(f"{what}: failed: {type(e).__name__}: {str(e)[:200]}")
        log(f"{what} failed: {e}")
    finally:
        peer.cleanup(r)
        shutil.rmtree(r.d, ignore_errors=True)

