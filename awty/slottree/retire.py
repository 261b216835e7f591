"""Retiring a finished slot: its directory leaves the tree in one rename (into
``.retired/<slot>.<random>``), the files that must stay go back into a new slot directory, and
the rest is renamed ``….purge`` and deleted by a detached ``rm -rf`` once the run is over.
Removing envelopes one by one was the costliest step of a run on a real disk."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path

from ..clock import file_time_now
from ..safeio import is_real_dir, private_dirs
from ..slots import parse_slot_id
from .staging import batch_name_id, known_name

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    import subprocess  # imported where used: a purge is rare

_PURGE = re.compile(r"[0-9]{12}\.[0-9a-f]{8}\.purge")  # what retire() names, and nothing else
_CUT_SHORT = re.compile(r"[0-9]{12}\.[0-9a-f]{8}")  # retired, its late files not yet put back
CUT_SHORT_AGE = 60.0  # seconds: a younger one may be another runner's retire() in progress

# the detached removals this process started (reaped as they end)
_PURGES: list[subprocess.Popen[bytes]] = []


def _reap() -> None:
    _PURGES[:] = [p for p in _PURGES if p.poll() is None]


def wait_purged(timeout: float | None = None) -> None:
    """Wait for this process's background removals (tests, benchmarks)."""
    for p in list(_PURGES):
        p.wait(timeout)
    _reap()


def retire(slot_dir: Path, retired: Path, done: set[str],
           ended: Callable[[list[str]], set[str]] | None,
           back: Callable[[], Path]) -> int:
    """Take a finished slot's directory out of the tree in one rename, for ``purge`` to
    delete. ``done`` are the ids whose envelopes may go with it, and those ``ended`` says have
    ended (other shards' work); any other file (dropped in while the slot ran) is moved back
    into ``back()``, the slot's directory made anew. Returns how many were moved back. Raises
    OSError when the directory cannot be moved (nothing changed then)."""
    private_dirs(retired)
    if not is_real_dir(str(retired)):
        raise OSError(errno.ENOTDIR, f"{retired} is not a directory")
    dest = retired / f"{slot_dir.name}.{os.urandom(4).hex()}"
    try:
        os.rename(slot_dir, dest)
    except FileNotFoundError:
        return 0
    # A batch file goes by its name's id, as an envelope does: the slot has no rows left,
    # and the file was awty's if its first job was (a drop-in names no job awty has).
    strangers = [n for n in os.listdir(dest) if not known_name(n, done)]
    if strangers and ended is not None:
        # Another shard's finished envelopes (its own run removes them a moment later)
        # go with the slot: moved back, they would outlive that removal as orphans.
        named = [i for i in (n[:-5] if n.endswith(".json") else batch_name_id(n)
                             for n in strangers) if i]
        gone = ended(named)
        strangers = [n for n in strangers if not known_name(n, gone)]
    moved = 0
    if strangers:
        to = back()
        for name in strangers:
            try:
                os.rename(dest / name, to / name)
                moved += 1
            except FileNotFoundError:
                # another shard's runner removed its own finished envelope meanwhile
                continue
    os.rename(dest, dest.with_name(dest.name + ".purge"))
    return moved


def purge(retired: Path, slot_dir: Callable[[str], Path]) -> None:
    """Delete the retired slot directories without waiting for it: a detached ``rm -rf``
    (C, its own process: no GIL, and the caller may exit). Without ``rm``, in process.
    ``slot_dir``: a slot's directory (by id), made anew, for a retirement cut short."""
    _reap()
    if not is_real_dir(str(retired)):
        return  # absent, or not ours to empty (a symlink is never followed)
    try:
        names = os.listdir(retired)
    except OSError:
        return  # left for doctor to report: the slots have run, that is what counts
    for name in names:  # a runner killed inside retire(): its files go back to the slot
        if _CUT_SHORT.fullmatch(name):
            try:
                if file_time_now() - os.lstat(retired / name).st_ctime > CUT_SHORT_AGE:
                    restore(retired / name, slot_dir)
            except (OSError, ValueError):
                pass  # doctor reports it
    paths = [str(retired / n) for n in names if _PURGE.fullmatch(n)]
    if not paths:
        return
    import subprocess

    try:
        _PURGES.append(subprocess.Popen(
            ["rm", "-rf", "--", *paths], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    except OSError:
        import shutil

        for path in paths:
            shutil.rmtree(path, ignore_errors=True)


def retired_dirs(retired: Path) -> list[Path]:
    try:
        return sorted(retired.iterdir())
    except FileNotFoundError:
        return []


def restore(path: Path, slot_dir: Callable[[str], Path]) -> int:
    """Put back the files of a retirement cut short (a crash between its rename and its
    check): the slot's next run sorts them out (orphans go, drop-ins are imported)."""
    sid = path.name.split(".", 1)[0]
    parse_slot_id(sid)  # ValueError: not a directory awty retired
    back = slot_dir(sid)
    names = os.listdir(path)
    for name in names:
        os.rename(path / name, back / name)
    os.rmdir(path)
    return len(names)
