"""``--profile DIR``: one extra, uncounted run of a figure under py-spy (every thread) or
cProfile, summarised per function."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import BIN, CHILDREN, die_with_parent
from .disk import settle

if TYPE_CHECKING:
    from .report import Report


def profiled(directory: str, rep: Report, name: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` once more under a profiler (--profile; not counted in the figures):
    py-spy when installed (samples every thread: the runner's store thread too), else
    cProfile (main thread only). Writes ``directory``/<name>.txt, a function-level summary, and
    lists it in the report."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    settle()
    spy = shutil.which("py-spy", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    t0 = time.perf_counter()
    if spy:
        raw = out / f"{name}.raw"
        rec = subprocess.Popen([spy, "record", "--pid", str(os.getpid()), "--rate", "250",
                                "--format", "raw", "--threads", "--function", "--output",
                                str(raw)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
        CHILDREN.append(rec)
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
            text = spy_summary(raw, wall) if raw.exists() else "py-spy wrote nothing\n"
            (out / f"{name}.txt").write_text(text)
            rep.profiles.append(f"- `{name}`: {wall:.2f} s under py-spy (250 Hz, all "
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
        rep.profiles.append(f"- `{name}`: {wall:.2f} s under cProfile (main thread "
                                 f"only): `{out / (name + '.txt')}` (`.prof` beside it)")


def spy_summary(raw: Path, wall: float, top: int = 30, rate: int = 250) -> str:
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
