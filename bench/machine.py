"""What the report says about the machine: its facts, and how busy it was besides the bench."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import sqlite3
import subprocess
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .common import ROOT, proc_cpu

if TYPE_CHECKING:
    from .receivers import Receiver


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
                + proc_cpu(receiver_pids))

    def other_cores(self, receiver_pids: Iterable[int]) -> float:
        wall = time.monotonic() - self.t0
        other = (self._busy() - self.busy0) - (self._ours(receiver_pids) - self.ours0)
        return max(0.0, other / wall) if wall > 0 else 0.0


def source_hash() -> str:
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
        ("awty", f"{awty.__version__} (git {rev}; sha256 of awty/*.py {source_hash()})"),
        ("receiver", f"{rx.name} on 127.0.0.1:{rx.port}, sharing the cores with awty"),
        ("homes", f"{workdir} ({fs})"),
    ]
