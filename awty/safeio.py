"""Writing files under home so that nothing planted there can redirect a write: a symlink is
never followed, an existing file is never truncated in place. A new file is created with
O_EXCL; a replaced one is written whole under a fresh temporary name and renamed over (a rename
replaces a symlink itself, never its target). Directories are walked one component at a time,
each opened with O_NOFOLLOW."""

from __future__ import annotations

import os
import stat
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW
# O_NONBLOCK: opening a FIFO someone left under home must not wait for a writer (it is then
# refused as "not a regular file"); it changes nothing for regular files.
OPEN_READ = os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0)


def write_new(path: Path | str, data: bytes, mode: int = 0o600) -> bool:
    """Create ``path`` holding ``data``; False (nothing written) when anything, a dangling
    symlink included, is already there."""
    try:
        fd = os.open(path, CREATE_NEW, mode)
    except FileExistsError:
        return False
    try:
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)
    return True


def replace_in(dir_fd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Write ``name`` in the directory ``dir_fd`` whole and atomically (temp + rename)."""
    tmp = f".{name}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, CREATE_NEW, mode, dir_fd=dir_fd)
    try:
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    try:
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise


def private_dir_fd(base: Path | str, *names: str) -> int:
    """A descriptor of ``base/names…``, each missing directory made 0700. ``base`` (home) is
    the operator's to place; below it a symlink is never followed: OSError ELOOP or ENOTDIR."""
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            sub = os.open(name, OPEN_DIR, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def private_dirs(path: Path) -> None:
    """``mkdir -p`` whose every new directory is 0700 whatever the umask (``Path.mkdir`` makes
    the parents it creates with the umask's mode: a world-writable ``slots/`` under umask 0)."""
    if not path.parent.is_dir():
        private_dirs(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)


def is_real_dir(path: str) -> bool:
    """A directory, not a symlink to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
