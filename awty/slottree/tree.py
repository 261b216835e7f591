"""The slot tree: ``<home>/slots/<YYYYMMDDHHMM>/<job-id>.json``, one small envelope per pending
job, or ``<first-id>.batch.jsonl``, the envelopes (one a line) of the jobs one batch put in that
slot (``staging``). It is the runner's work list and what an operator sees with ``ls``; the
store decides what is true. Files are written atomically (temp file + rename) and never followed
through symlinks; bad files are set aside (``rejected``), finished slots retired whole
(``retire``).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

from ..ids import is_id
from ..model import Decision, Job, Reslot
from ..record import Record, _draft, _seal
from ..safeio import OPEN_DIR, OPEN_READ, is_real_dir, private_dir_fd, private_dirs, replace_in
from ..slots import parse_slot_id, slot_id
from . import rejected as _rejected
from . import retire as _retire
from .rejected import Rejected
from .staging import (
    BATCH_SUFFIX,
    LINE_HEAD,
    MAX_BATCH_BYTES,
    MAX_ENVELOPE_BYTES,
    batch_files,
    batch_name_id,
    envelope_bytes,
    known_name,
    staged,
)
from .staging import incoming_dirs as _incoming_dirs

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

_NOT_A_DIR = (errno.ENOTDIR, errno.ELOOP)  # what O_NOFOLLOW|O_DIRECTORY says of a symlink


# O_TMPFILE + link: an unnamed file made whole, then given its name in one step. Atomic like
# temp + rename, and a third cheaper (12 µs vs 19 µs a file here), which is what lets
# add_many reach its target. Filesystems without O_TMPFILE fall back to temp + rename.
_TMPFILE_OK = [hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")]


def _link_new(dfd: int, final: str, data: bytes) -> None:
    fd = os.open(".", os.O_WRONLY | os.O_TMPFILE, 0o600, dir_fd=dfd)
    try:
        os.write(fd, data)
        os.link(f"/proc/self/fd/{fd}", final, dst_dir_fd=dfd, follow_symlinks=True)
    finally:
        os.close(fd)


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"not JSON ({e})") from None
    except RecursionError:
        raise ValueError("not JSON (nested too deeply)") from None


def _object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _line(n: int, raw: bytes) -> dict[str, Any]:
    """Line ``n`` of a batch file: a JSON object of at most MAX_ENVELOPE_BYTES."""
    if len(raw) > MAX_ENVELOPE_BYTES:
        raise ValueError(f"line {n}: too large ({len(raw)} bytes > {MAX_ENVELOPE_BYTES})")
    try:
        return _object(_parse(raw))
    except ValueError as e:
        raise ValueError(f"line {n}: {e}") from None


def _removed(dfd: int) -> bool:
    """The directory behind ``dfd`` was removed (or replaced by a rename): nothing can be made
    in it any more, and creating a file there fails ENOENT, or EPERM for an O_TMPFILE one."""
    try:
        return os.fstat(dfd).st_nlink == 0
    except OSError:
        return True


def _rename_into(dfd: int, final: str, data: bytes) -> None:
    replace_in(dfd, final, data)  # a fresh temp name (O_EXCL, O_NOFOLLOW), renamed over


class Entry(Record):
    __slots__ = ("name", "dir", "job_id")
    name: str  # file name in the slot directory
    dir: Path  # the directory holding it
    job_id: str | None  # the id the file name carries (<id>.json), if it looks like one

    def __new__(cls, name: str, dir: Path, job_id: str | None) -> Entry:
        s = _draft(cls)
        s.name = name
        s.dir = dir
        s.job_id = job_id
        return _seal(s, cls)

    @property
    def batch_id(self) -> str | None:
        """The id a batch file (``<first-id>.batch.jsonl``) is named by; None otherwise."""
        return batch_name_id(self.name)

    @property
    def path(self) -> Path:
        # made when used: a run lists every entry of its slot beside the sending, and joining
        # a Path for each was half of the 5.8 µs an entry took (0.6 s for 100,000, under the GIL)
        return self.dir / self.name


class Settled(Record):
    """What settling a slot did: files that arrived during its run and wait there for the
    next (``kept``), and the changes that could not be made (``trouble``)."""

    __slots__ = ("kept", "trouble")
    kept: int
    trouble: list[OSError]

    def __new__(cls, kept: int, trouble: list[OSError]) -> Settled:
        s = _draft(cls)
        s.kept = kept
        s.trouble = trouble
        return _seal(s, cls)


class SlotTree:
    """The slot tree of a home whose store is its own (SQLite): the files follow the store."""

    keeps_files = True

    def __init__(self, home: Path):
        self.home = home
        self.root = home / "slots"
        self.rejected = home / "rejected"
        self.locks = home / "locks"
        self.retired = home / ".retired"  # finished slot directories, being deleted
        # where adds before batch files staged a big batch's envelopes (doctor clears leftovers)
        self.incoming = home / ".incoming"
        self._made: set[str] = set()
        self._fds: dict[str, int] = {}
        self._root_fd: int | None = None
        # Held while a cached descriptor is used, not only looked up: a runner writes from
        # several threads (two slots' recorders in a catch-up, the reconciler), and a
        # descriptor closed by another thread's eviction or ``_forget`` meanwhile could be
        # reopened as another slot's, putting the envelope in the wrong directory.
        self.fd_lock = threading.RLock()

    def slot_path(self, slot: datetime) -> Path:
        return self.root / slot_id(slot)

    def create(self) -> None:
        """``slots/`` made (0700) for ``init``."""
        self.root.mkdir(mode=0o700, exist_ok=True)

    def _ensure(self, sid: str) -> Path:
        """The slot's directory, made if missing; OSError ENOTDIR when it (or ``slots/``) is
        a symlink: files moved back into a slot never land outside the tree."""
        path = self.root / sid
        if sid not in self._made:
            private_dirs(path)
            if not (is_real_dir(str(self.root)) and is_real_dir(str(path))):
                raise OSError(errno.ENOTDIR, f"{path} is not a directory of the slot tree")
            self._made.add(sid)
        return path

    # -- writing --------------------------------------------------------------------------
    def write(self, job: Job, isos: dict[datetime, str] | None = None) -> None:
        """Write (or replace) the job's envelope in its slot, atomically: a reader sees the
        whole file or none. Relative to an open descriptor of the slot directory (no path walk
        per file, never through a symlinked slot). ``isos``: see ``envelope_bytes``."""
        self._put(slot_id(job.next_check_at), f"{job.id}.json", envelope_bytes(job, isos))

    def write_batch(self, jobs: list[Job], isos: dict[datetime, str] | None = None) -> None:
        """These jobs' envelopes (all of one slot), one a line, in batch files
        (``staging.batch_files``), each written atomically as an envelope is: a reader sees
        every line or no file."""
        sid = slot_id(jobs[0].next_check_at)
        for name, data, _ in batch_files(jobs, {} if isos is None else isos):
            self._put(sid, name, data)

    def _put(self, sid: str, final: str, data: bytes) -> None:
        for again in (False, True):
            with self.fd_lock:
                dfd = self._dir_fd(sid)
                try:
                    if _TMPFILE_OK[0]:
                        try:
                            return _link_new(dfd, final, data)
                        except FileExistsError:
                            pass  # replacing an envelope: rename over it below
                        except OSError as e:
                            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                                raise
                            _TMPFILE_OK[0] = False
                    return _rename_into(dfd, final, data)
                except OSError:
                    if again or not _removed(dfd):
                        raise
                    self._forget(sid)  # the directory was removed under us (its slot emptied)

    def _dir_fd(self, sid: str) -> int:
        """The slot directory's descriptor, cached; call it, and use what it returns, holding
        ``fd_lock``."""
        fd = self._fds.get(sid)
        if fd is None:
            try:
                fd = self._open_slot(sid)
            except OSError as e:
                if e.errno not in _NOT_A_DIR or not self.set_aside_slot_link(parse_slot_id(sid)):
                    raise
                fd = self._open_slot(sid)  # a real directory in place of the link set aside
            if len(self._fds) >= 256:  # evict the oldest, not all: batches span many slots
                os.close(self._fds.pop(next(iter(self._fds))))
            self._fds[sid] = fd
        return fd

    def _open_slot(self, sid: str) -> int:
        """Neither ``slots/`` nor the slot directory may be a symlink: a write never lands
        outside the tree."""
        fd = private_dir_fd(self._home(), "slots", sid)
        self._made.add(sid)
        return fd

    def _home(self) -> Path:
        """Home, made (0700) if missing: a batch's first envelopes may come before the store
        (which makes it) is opened."""
        if not self.home.is_dir():
            private_dirs(self.home)
        return self.home

    def root_fd(self) -> int:
        """A descriptor of ``slots/`` (made if missing; never through a symlink), kept open.
        Use it holding ``fd_lock``."""
        if self._root_fd is not None and _removed(self._root_fd):
            os.close(self._root_fd)
            self._root_fd = None
        if self._root_fd is None:
            self._root_fd = private_dir_fd(self._home(), "slots")
        return self._root_fd

    def _forget(self, sid: str) -> None:
        with self.fd_lock:
            self._made.discard(sid)
            fd = self._fds.pop(sid, None)
            if fd is not None:
                os.close(fd)

    def close(self) -> None:
        with self.fd_lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            if self._root_fd is not None:
                os.close(self._root_fd)
                self._root_fd = None

    def write_many(self, jobs: Iterable[Job]) -> int:
        """The envelopes of jobs added together (``staging.staged``: batch files for a slot
        given several); returns how many jobs they hold."""
        n = 0
        for sid, name, data, held in staged(jobs):
            self._put(sid, name, data)
            n += held
        return n

    def incoming_dirs(self) -> list[Path]:
        return _incoming_dirs(self.incoming)

    def remove(self, job_id: str, slot: datetime) -> bool:
        sid = slot_id(slot)
        with self.fd_lock:
            fd = self._fds.get(sid)
            try:
                if fd is None:
                    if not is_real_dir(os.path.join(self.root, sid)):
                        return False
                    fd = self._dir_fd(sid)
                os.unlink(f"{job_id}.json", dir_fd=fd)
                return True
            except FileNotFoundError:
                return False

    def remove_many(self, job_ids: list[str], slot: datetime,
                    missing: list[str] | None = None) -> list[OSError]:
        """Remove these jobs' envelopes from one slot; returns the errors (a missing file is
        not one: its id goes to ``missing``, when given: a job of a batch file, say). Safe to
        call from several threads at once: it keeps its own descriptor."""
        try:
            fd = os.open(self.root / slot_id(slot), OPEN_DIR)
        except FileNotFoundError:
            if missing is not None:
                missing += job_ids
            return []
        except OSError as e:
            return [e]
        errors: list[OSError] = []
        try:
            for job_id in job_ids:
                try:
                    os.unlink(f"{job_id}.json", dir_fd=fd)
                except FileNotFoundError:
                    if missing is not None:
                        missing.append(job_id)
                except OSError as e:
                    errors.append(e)
        finally:
            os.close(fd)
        return errors

    def retire(self, slot: datetime, done: set[str],
               ended: Callable[[list[str]], set[str]] | None = None) -> int:
        """Take a finished slot's directory out of the tree in one rename (``retire.retire``);
        returns how many files were moved back into the slot."""
        sid = slot_id(slot)
        self._forget(sid)
        return _retire.retire(self.root / sid, self.retired, done, ended,
                              lambda: self._ensure(sid))

    def purge_retired(self) -> None:
        """Delete the retired slot directories without waiting for it (``retire.purge``)."""
        _retire.purge(self.retired, self._ensure)

    def retired_dirs(self) -> list[Path]:
        return _retire.retired_dirs(self.retired)

    def restore_retired(self, path: Path) -> int:
        """Put back the files of a retirement cut short (``retire.restore``)."""
        return _retire.restore(path, self._ensure)

    def remove_slot_if_empty(self, slot: datetime) -> bool:
        sid = slot_id(slot)
        self._forget(sid)
        try:
            os.rmdir(self.root / sid)
            return True
        except OSError:
            return False

    # -- following the store --------------------------------------------------------------
    def apply(self, applied: Iterable[Decision]) -> list[OSError]:
        """A run's decisions, recorded by the store, followed: a re-slotted job's envelope is
        written in its new slot now; the files of the slot it ran from go when the slot is
        settled (``settle``). Returns the writes that failed (a full or read-only disk): they
        undo nothing, a pending row without an envelope still runs and doctor --repair
        writes it."""
        trouble: list[OSError] = []
        for d in applied:
            if isinstance(d, Reslot):
                try:
                    self.write(d.job.replace(next_check_at=d.next_check_at,
                                             check_count=d.check_count, attempt=d.attempt))
                except OSError as e:
                    trouble.append(e)
        return trouble

    def settle(self, slot: datetime, done: list[str], *,
               rows_left: Callable[[], bool] | None = None,
               ended: Callable[[list[str]], set[str]] | None = None,
               pending: Callable[[list[str]], set[str]] | None = None) -> Settled:
        """The jobs ``done`` are no longer pending in ``slot`` (a run recorded them, a command
        cancelled or moved them): their files leave it, and the slot's directory too once
        empty. ``rows_left`` (a run's end: does the store still hold rows in the slot?): a slot
        with none is retired whole (``retire``: one rename, a detached ``rm``), keeping only
        files that arrived during the run and are not ``ended``. Otherwise the ``<id>.json``
        files go, in parallel when there are many (each unlink ~70 µs on ext4 once written
        back); ``pending`` (which of some ids are still pending in the slot) settles the batch
        files holding a job that had no file of its own. A file that cannot be removed is an
        orphan the slot's next run removes: the errors are returned, nothing is undone."""
        trouble: list[OSError] = []
        kept = 0
        if done and rows_left is not None and not rows_left():
            try:
                kept = self.retire(slot, set(done), ended)
            except OSError as e:
                trouble.append(e)
            else:
                done = []
        if done:
            in_batch: list[str] | None = [] if pending is not None else None
            chunks = [done[i:i + 256] for i in range(0, len(done), 256)]
            if len(chunks) == 1:
                trouble += self.remove_many(chunks[0], slot, in_batch)
            else:
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(8, thread_name_prefix="awty-unlink") as pool:
                    for errors in pool.map(lambda ids: self.remove_many(ids, slot, in_batch),
                                           chunks):
                        trouble += errors
            if in_batch and pending is not None:
                self.settle_batches(slot, pending)
        self.remove_slot_if_empty(slot)
        return Settled(kept, trouble)

    # -- reading --------------------------------------------------------------------------
    def names(self, slot: datetime) -> list[str]:
        """Every non-hidden file name in the slot directory, in no set order. A slot "directory"
        that is a symlink is not listed through (see ``set_aside_slot_link``)."""
        try:
            fd = os.open(self.slot_path(slot), OPEN_DIR)
        except OSError as e:
            if e.errno == errno.ENOENT or e.errno in _NOT_A_DIR:
                return []
            raise
        try:
            return [n for n in os.listdir(fd) if not n.startswith(".")]
        finally:
            os.close(fd)

    def entries(self, slot: datetime, names: list[str] | None = None) -> Iterator[Entry]:
        """The slot directory's files (``names``: these of its names, from ``names()``), in name
        order."""
        path = self.slot_path(slot)
        for name in sorted(self.names(slot) if names is None else names):
            job_id = name[:-5] if name.endswith(".json") and is_id(name[:-5]) else None
            yield Entry(name, path, job_id)

    def strangers(self, slot: datetime, here: set[str],
                  names: list[str] | None = None) -> list[Entry]:
        """The slot's files but the envelopes of the jobs in ``here`` (and the batch files named
        by one of them: kept while that job is pending), in name order. Only these
        become Entries: at 100,000 files, every name sorted, checked as an id and wrapped took
        the sending loop's GIL for ~0.3 s."""
        names = self.names(slot) if names is None else names
        return list(self.entries(slot, [n for n in names if not known_name(n, here)]))

    def read(self, entry: Entry) -> dict[str, Any]:
        """Parse an envelope without following symlinks; raises ValueError with the reason."""
        return _object(_parse(self._raw(entry, MAX_ENVELOPE_BYTES)))

    def batch_ids(self, entry: Entry) -> list[str | None]:
        """The id of each line of a batch file (None: a line without one), read without
        parsing the lines awty wrote (each begins ``{"v":1,"id":"<id>"``). Raises ValueError
        with the reason (unreadable, too large, a line that is not a JSON object)."""
        out: list[str | None] = []
        for n, line in enumerate(self._raw(entry, MAX_BATCH_BYTES).splitlines(), 1):
            if line.startswith(LINE_HEAD) and line[39:40] == b'"':
                out.append(line[13:39].decode("ascii", "replace"))
            elif line.strip():
                got = _line(n, line).get("id")
                out.append(got if isinstance(got, str) else None)
        return out

    def read_batch(self, entry: Entry) -> list[dict[str, Any]]:
        """Every line of a batch file parsed (blank lines skipped); raises ValueError naming
        the line."""
        return [_line(n, line) for n, line in
                enumerate(self._raw(entry, MAX_BATCH_BYTES).splitlines(), 1) if line.strip()]

    def settle_batches(self, slot: datetime,
                       pending: Callable[[list[str]], set[str]]) -> int:
        """Remove the slot's batch files none of whose jobs is pending in it (``pending``: which
        of these ids are); returns how many went. A file named by a pending job is kept unread.
        An unreadable file is left to the slot's run (it sets it aside)."""
        gone = 0
        for entry in self.entries(slot, [n for n in self.names(slot) if batch_name_id(n)]):
            if pending([entry.batch_id or ""]):
                continue
            try:
                ids = [i for i in self.batch_ids(entry) if i]
            except ValueError:
                continue
            if ids and not pending(ids):
                self.remove_entry(entry)
                gone += 1
        return gone

    def _raw(self, entry: Entry, limit: int) -> bytes:
        try:
            fd = os.open(entry.path, OPEN_READ)
        except OSError as e:
            if e.errno == errno.ELOOP:  # a symlink
                raise ValueError("is a symlink (never followed)") from None
            raise ValueError(f"cannot open: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError("not a regular file")
            if st.st_size > limit:
                raise ValueError(f"too large ({st.st_size} bytes > {limit})")
            chunks = []
            left = limit + 1
            while left > 0:  # one read() returns at most ~2 GiB, and a pipe less
                chunk = os.read(fd, min(left, 1 << 24))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def set_aside(self, entry: Entry, slot: datetime, reason: str) -> Path:
        """Move a bad file out of the slot into ``rejected/<slot>/`` with a ``.reason`` note
        (``rejected.set_aside``)."""
        return _rejected.set_aside(self.home, entry.path, slot, reason)

    def rejected_files(self) -> list[Rejected]:
        """Every file set aside, oldest slot first, with its reason (for ``doctor``)."""
        return _rejected.rejected_files(self.rejected)

    def set_aside_slot_link(self, slot: datetime) -> str | None:
        """A slot must be a real directory. A symlink (or any non-directory) in its place is
        never followed: the link itself is moved to ``rejected/<slot>/<slot>`` with a reason,
        and the reason is returned (None when the slot is a directory or absent)."""
        sid = slot_id(slot)
        path = self.root / sid
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(mode):
            return None
        reason = ("the slot directory is a symlink (never followed)" if stat.S_ISLNK(mode)
                  else "the slot path is not a directory")
        self._forget(sid)
        self.set_aside(Entry(sid, self.root, None), slot, reason)
        return reason

    def remove_entry(self, entry: Entry) -> None:
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            pass

    def slots(self) -> list[datetime]:
        """Slot directories present in the tree, oldest first (names that are not slot ids are
        ignored: the tree may hold an operator's README)."""
        out = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        for name in names:
            try:
                out.append(parse_slot_id(name))
            except ValueError:
                continue
        return sorted(out)

    def temp_files(self, slot: datetime) -> list[Path]:
        path = self.slot_path(slot)
        try:
            return [path / e.name for e in os.scandir(path) if e.name.endswith(".tmp")]
        except FileNotFoundError:
            return []


class NoTree:
    """The slot tree of a home whose store hosts share (PostgreSQL): there is none, since
    drop-in envelopes are a single-host feature. Every change to the files is nothing to do and
    every listing is empty, so that the run and the facade never ask which store they have."""

    keeps_files = False

    def create(self) -> None:
        pass

    def close(self) -> None:
        pass

    def write(self, job: Job, isos: dict[datetime, str] | None = None) -> None:
        pass

    def write_many(self, jobs: Iterable[Job]) -> int:
        return 0

    def remove(self, job_id: str, slot: datetime) -> bool:
        return False

    def apply(self, applied: Iterable[Decision]) -> list[OSError]:
        return []

    def settle(self, slot: datetime, done: list[str], *,
               rows_left: Callable[[], bool] | None = None,
               ended: Callable[[list[str]], set[str]] | None = None,
               pending: Callable[[list[str]], set[str]] | None = None) -> Settled:
        """Nothing to settle: the store's answers are never asked for."""
        return Settled(0, [])

    def remove_slot_if_empty(self, slot: datetime) -> bool:
        return False

    def purge_retired(self) -> None:
        pass

    def slots(self) -> list[datetime]:
        return []

    def names(self, slot: datetime) -> list[str]:
        return []

    def strangers(self, slot: datetime, here: set[str],
                  names: list[str] | None = None) -> list[Entry]:
        return []
