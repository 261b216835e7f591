"""How soon `awty run-slot` (the CLI process, as cron starts it) sends its first callback,
for a slot holding N due jobs (issue 12, item 1). Each try starts `awty run-slot`, notes the
receiver's clock at the first request, and stops the process with SIGTERM (a graceful stop:
the claims it did not send are given back), so one filled home serves every try, and two
awty trees can be compared interleaved in one sitting.

    python -m bench.first_callback --jobs 100000 --tries 7 [--tree A --tree B]

``--tree DIR`` runs that checkout's ``awty`` (PYTHONPATH=DIR) instead of the installed one;
with several, the tries alternate (A, B, A, B …) and each tree's median is given as a ratio
of the first tree's. Every try is printed, in order."""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from .common import BASE, SECRET_TEXT, clean_env, iso


def fill(home: Path, n: int, url: str, slot) -> None:
    from awty.api import Awty
    from awty.clock import FixedClock

    with Awty(home, clock=FixedClock(slot - timedelta(hours=1)),
              env={"AWTY_SIGNING_SECRET": SECRET_TEXT}) as a:
        a.init()
        for start in range(0, n, 50_000):
            a.add_many([{"target": url, "at": iso(slot), "payload": {"order": i},
                         "entity": "order", "key": str(i)}
                        for i in range(start, min(n, start + 50_000))])


def fill_with(tree: str | None, home: Path, n: int, url: str, slot) -> None:
    """Fill ``home`` with that tree's awty (its schema), in a process of its own."""
    env = clean_env()
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = f"{tree}:{here}" if tree else here
    code = ("import sys; from datetime import datetime; from bench.first_callback import fill; "
            "fill(__import__('pathlib').Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], "
            "datetime.fromisoformat(sys.argv[4]))")
    subprocess.run([sys.executable, "-c", code, str(home), str(n), url, slot.isoformat()],
                   env=env, cwd=home.parent, check=True)


def first_after(home: Path, slot, rx, tree: str | None) -> float:
    env = clean_env(AWTY_NOW=iso(slot + timedelta(seconds=5)), AWTY_SIGNING_SECRET=SECRET_TEXT,
                    AWTY_HOME=str(home))
    if tree:
        env["PYTHONPATH"] = tree
    before = len(rx.requests())
    t0 = time.time()
    # cwd: not a checkout, so that `-m awty` takes PYTHONPATH's awty
    p = subprocess.Popen([sys.executable, "-m", "awty", "run-slot"], env=env, cwd=home.parent,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while len(rx.requests()) == before:
            if p.poll() is not None:
                raise RuntimeError(f"run-slot exited {p.returncode} before any callback")
            time.sleep(0.0005)
        first = rx.requests()[before].at
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
    return first - t0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.first_callback")
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--tries", type=int, default=7)
    ap.add_argument("--tree", action="append", default=[])
    a = ap.parse_args(argv)
    from awty.testing.receiver import Receiver

    slot = BASE + timedelta(hours=4)
    trees = a.tree or [None]
    with Receiver() as rx, tempfile.TemporaryDirectory(prefix="awty-first-") as tmp:
        homes = {t: Path(tmp) / f"home{i}" for i, t in enumerate(trees)}
        for t, home in homes.items():
            fill_with(t, home, a.jobs, rx.url("/hook"), slot)
        for t in trees:  # untimed: the first process of a tree may compile its bytecode
            first_after(homes[t], slot, rx, t)
        seen: dict[str | None, list[float]] = {t: [] for t in trees}
        for _ in range(a.tries):
            for t in trees:
                seen[t].append(first_after(homes[t], slot, rx, t) * 1000)
    base = statistics.median(seen[trees[0]])
    for t in trees:
        v = seen[t]
        ratio = f", {statistics.median(v) / base:.2f}× the first tree" if t != trees[0] else ""
        print(f"{t or 'installed'}: {a.jobs:,} due, run-slot start -> first callback: median "
              f"{statistics.median(v):.0f} ms (min {min(v):.0f}, max {max(v):.0f}, {len(v)} "
              f"tries{ratio}): " + " ".join(f"{x:.0f}" for x in v))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
