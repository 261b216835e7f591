"""The disk between timed runs: homes kept or removed, background removals waited for, and a
quiet disk before each timed run, so that no run pays for another's disk work."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

KEEP_HOMES_FREE = 20e9  # bytes the disk must keep free for homes to stay until the end
KEPT: list[Path] = []  # homes left for the final removal of the work directory
REMOVED_AT_ONCE: list[Path] = []


def remove_home(path: Path) -> None:
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


def settle() -> None:
    """Before a timed run: let the background removals of retired slot directories that
    earlier runs started finish, and write back what earlier steps left dirty (the homes just
    filled, the ones just removed), so that no run pays for another's disk work. A cron-driven
    home is in this state too: its jobs were added well before their slot."""
    from awty.slottree.retire import wait_purged

    wait_purged(timeout=600)
    if hasattr(os, "sync"):
        os.sync()
    disk_quiet()


QUIET_WAITS: list[float] = []  # seconds each settle() waited for the disk (reported)
# The longest wait for a quiet disk; a quick run (a smoke test, often on a busy machine) sets
# a few seconds so that its sections stay within their time limit.
QUIET_LIMIT = [30.0]


def disk_quiet(still: float = 0.5, limit: float | None = None) -> None:
    """Wait until the work directory's disk has had no I/O for ``still`` seconds. sync()
    returns with the discards of files just deleted (ext4 ``discard``) still being issued: a
    run started then is slowed by disk work that is not its own (a 100,000-file add took 6 s
    or 19 s by that alone). Bounded: after ``limit`` seconds the run goes ahead."""
    stat_file = disk_stat_file()
    if stat_file is None:
        return
    limit = QUIET_LIMIT[0] if limit is None else limit
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


def disk_stat_file() -> Path | None:
    try:
        st = os.stat(WORKDIR_FOR_QUIET[0] if WORKDIR_FOR_QUIET else ".")
    except OSError:
        return None
    path = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat")
    return path if path.exists() else None


def disk_written() -> int:
    """Bytes the work directory's disk has written so far (0 where /sys does not say)."""
    path = disk_stat_file()
    return int(path.read_text().split()[6]) * 512 if path else 0


def remove_workdir(workdir: Path, base: Path) -> None:
    print(f"bench: removing {workdir} …", file=sys.stderr)
    try:  # rm: C, much faster than rmtree for the millions of envelopes the homes hold
        subprocess.run(["rm", "-rf", "--", str(workdir)], check=False)
    except OSError:
        shutil.rmtree(workdir, ignore_errors=True)
    with contextlib.suppress(OSError):
        base.rmdir()  # only when empty


def purge_seconds() -> float:
    """How long the background removal of the slot directories just retired still runs."""
    from awty.slottree.retire import wait_purged

    t0 = time.perf_counter()
    wait_purged(timeout=600)
    return time.perf_counter() - t0
