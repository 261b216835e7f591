"""Files set aside: a bad file found in a slot moves to ``rejected/<slot>/`` with a
``.reason`` note beside it, for an operator to read (``doctor`` lists them). Nothing under
``rejected/`` is followed through a symlink."""

from __future__ import annotations

import os
import stat
from datetime import datetime
from pathlib import Path

from ..record import Record, _draft, _seal
from ..safeio import OPEN_READ, private_dir_fd, replace_in
from ..slots import slot_id

REASON_LIMIT = 4096  # bytes of a .reason note read back


class Rejected(Record):
    """A file set aside in ``rejected/<slot>/``, and why (its ``.reason`` note)."""

    __slots__ = ("path", "slot", "reason")
    path: Path
    slot: str
    reason: str | None

    def __new__(cls, path: Path, slot: str, reason: str | None) -> Rejected:
        s = _draft(cls)
        s.path = path
        s.slot = slot
        s.reason = reason
        return _seal(s, cls)


def set_aside(home: Path, path: Path, slot: datetime, reason: str) -> Path:
    """Move the file at ``path`` into ``rejected/<slot>/`` with a ``.reason`` note. Neither
    ``rejected/`` nor its slot directory is followed if it is a symlink (OSError)."""
    sid = slot_id(slot)
    dfd = private_dir_fd(home, "rejected", sid)
    try:
        # rename moves a symlink itself, never its target
        os.rename(path, path.name, dst_dir_fd=dfd)
        replace_in(dfd, path.name + ".reason",
                   (reason + "\n").encode("utf-8", "backslashreplace"))
    finally:
        os.close(dfd)
    return home / "rejected" / sid / path.name


def rejected_files(rejected: Path) -> list[Rejected]:
    """Every file set aside, oldest slot first, with its reason."""
    out: list[Rejected] = []
    try:
        slots = sorted(e.name for e in os.scandir(rejected)
                       if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for sid in slots:
        path = rejected / sid
        try:
            names = sorted(os.listdir(path))
        except OSError:
            continue
        have = set(names)
        for name in names:
            if name.startswith(".") or name.endswith(".reason"):
                continue
            reason = None
            if name + ".reason" in have:
                reason = _read_note(path / (name + ".reason"))
            out.append(Rejected(path / name, sid, reason))
    return out


def _read_note(path: Path) -> str | None:
    try:
        fd = os.open(path, OPEN_READ)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, REASON_LIMIT).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)
