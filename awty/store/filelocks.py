"""The SQLite store's process locks, on flock(2): owner sessions and slot locks.

- An owner session is an exclusive flock on ``locks/run-<owner>.lock`` held for a whole run.
  Another process asks whether the owner is alive by trying to lock the same file: the kernel
  answers, whatever any clock says. A runner that exits removes its file; one that was
  killed leaves it unlocked (dead); an owner with no file never opened a session (unknown).
- A slot lock: an unsharded run holds ``<slot>.lock`` exclusively; a shard holds it shared
  and ``<slot>.shard<i>of<n>.lock`` exclusively, so an unsharded run and sharded runs of one
  slot exclude each other while shards run side by side.

Every file here is opened with O_NOFOLLOW and checked to be a regular file: something planted
at a lock path (a symlink, a directory) is refused with a one-line error, never followed,
truncated or written through. Holder notes (``.owner``) are written to a fresh temporary file
and renamed into place, which replaces a planted link instead of writing to its target.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ..errors import StoreError
from ..slots import slot_id

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")


def open_lock_file(path: Path) -> int:
    """An fd on the regular file at ``path`` (created 0600), never through a link."""
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise StoreError(f"{path} is a symbolic link, not a lock file; move it aside "
                             "(`awty doctor --repair` does)") from None
        if e.errno == errno.EISDIR:
            raise StoreError(f"{path} is a directory, not a lock file; move it aside "
                             "(`awty doctor --repair` does)") from None
        raise StoreError(f"cannot open lock file {path}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StoreError(f"{path} is not a regular file; move it aside "
                         "(`awty doctor --repair` does)")
    return fd


def try_flock(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def write_note(path: Path, text: str) -> None:
    """Replace ``path`` with a file holding ``text``: a temporary file made with O_EXCL, then a
    rename (which replaces a symlink planted at ``path`` instead of following it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(3).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def read_note(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, 200).decode(errors="replace").strip() or None
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _holder_text() -> str:
    import socket  # only a lock holder names itself: not on every `awty add`

    return f"pid {os.getpid()} on {socket.gethostname()}"


# -- owner sessions ------------------------------------------------------------------------
class OwnerSessions:
    def __init__(self, locks: Path):
        self.locks = locks

    def _path(self, owner: str) -> Path:
        return self.locks / f"run-{_UNSAFE.sub('_', owner)}.lock"

    @contextmanager
    def session(self, owner: str) -> Iterator[None]:
        self.locks.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self._path(owner)
        fd = open_lock_file(path)
        try:
            if not try_flock(fd, fcntl.LOCK_EX):
                raise StoreError(f"owner {owner} already has a session")
            try:
                yield
            finally:
                _unlink(path)  # before unlocking: a checker that opened it still sees it held
        finally:
            os.close(fd)

    def alive(self, owner: str | None) -> bool | None:
        """True: the owner holds its session now. False: it opened one and is gone (killed).
        None: it never opened one here (its lease alone tells)."""
        if not owner:
            return None
        try:
            fd = os.open(self._path(owner), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError:
            return None
        try:
            if try_flock(fd, fcntl.LOCK_SH):
                fcntl.flock(fd, fcntl.LOCK_UN)
                return False
            return True
        finally:
            os.close(fd)


# -- slot locks ----------------------------------------------------------------------------
class FlockSlotLock:
    """The ``SlotLock`` of the SQLite store (see the module docstring)."""

    def __init__(self, locks: Path, slot: datetime, shard: tuple[int, int] | None):
        self.locks = locks
        self.sid = slot_id(slot)
        self.shard = shard
        self.slot_path = locks / f"{self.sid}.lock"
        self.shard_path = (locks / f"{self.sid}.shard{shard[0]}of{shard[1]}.lock"
                           if shard else None)
        self._fds: list[int] = []
        self._held = False
        self._blocked_by: Path | None = None

    def acquire(self) -> bool:
        self.locks.mkdir(mode=0o700, parents=True, exist_ok=True)
        steps = [(self.slot_path, fcntl.LOCK_EX if self.shard is None else fcntl.LOCK_SH)]
        if self.shard_path is not None:
            steps.append((self.shard_path, fcntl.LOCK_EX))
        for path, how in steps:
            fd = open_lock_file(path)
            if not try_flock(fd, how):
                os.close(fd)
                self._blocked_by = path
                self.release()
                return False
            self._fds.append(fd)
        self._held = True
        write_note(self._note_path(self.shard_path or self.slot_path), _holder_text())
        return True

    def release(self) -> None:
        if self._held:
            self._held = False
            _unlink(self._note_path(self.shard_path or self.slot_path))
        while self._fds:
            os.close(self._fds.pop())

    def holder(self) -> str:
        blocked = self._blocked_by or self.slot_path
        notes = [blocked]
        if blocked == self.slot_path and self.shard is None:
            notes += sorted(self.locks.glob(f"{self.sid}.shard*of*.lock"))
        for p in notes:
            text = read_note(self._note_path(p))
            if text:
                return text
        return "another runner"

    @staticmethod
    def _note_path(lock: Path) -> Path:
        return lock.with_name(lock.name + ".owner")
