"""Lock files: something planted at a lock path (a symlink, a directory) would stop its slot
from running (the runner refuses it with a one-line error rather than follow it). Doctor
names each one, and ``--repair`` moves it aside (renames the link itself, never its target)."""

from __future__ import annotations

import os
import stat
from functools import partial
from pathlib import Path

from .base import Ctx, Finding, Tally


def _planted(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return False
    return not stat.S_ISREG(mode)


def _move_aside(path: Path) -> None:
    n = 0
    while True:
        aside = path.with_name(f"{path.name}.aside{n or ''}")
        if not os.path.lexists(aside):
            os.rename(path, aside)  # renames a symlink itself: its target is never touched
            return
        n += 1


def check_locks(ctx: Ctx) -> Finding:
    locks = ctx.a.home / "locks"
    t = Tally()
    if locks.is_symlink() or (locks.exists() and not locks.is_dir()):
        t.note("locks")
        t.attempt(lambda: _move_aside(locks), ctx.repair)
    elif locks.is_dir():
        for path in sorted(locks.iterdir()):
            if path.name.endswith((".lock", ".lock.owner")) and _planted(path):
                kind = "symlink" if path.is_symlink() else "not a file"
                t.note(f"{path.name} ({kind})")
                t.attempt(partial(_move_aside, path), ctx.repair)
    return t.finding("locks", "no planted lock files",
                     "lock path(s) that are not plain files (the slot cannot run)",
                     ("moves them aside", "moved aside"), ctx.repair)
