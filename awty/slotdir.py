"""The slot tree: ``<home>/slots/<YYYYMMDDHHMM>/<job-id>.json``, one small envelope per pending
job, or ``<first-id>.batch.jsonl``, the envelopes (one a line) of the jobs one batch put in that
slot. It is the runner's work list and what an operator sees with ``ls``; SQLite decides what is
true. Files are written atomically (temp file + rename) and never followed through symlinks.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

from .clock import file_time_now
from .ids import is_id
from .model import Job
from .record import Record, _draft, _seal
from .safeio import private_dir_fd, replace_in
from .slots import iso, parse_slot_id, slot_id

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any
    import subprocess  # imported where used: a purge is rare

ENVELOPE_VERSION = 1
_PURGE = re.compile(r"[0-9]{12}\.[0-9a-f]{8}\.purge")  # what retire() names, and nothing else
_CUT_SHORT = re.compile(r"[0-9]{12}\.[0-9a-f]{8}")  # retired, its late files not yet put back
CUT_SHORT_AGE = 60.0  # seconds: a younger one may be another runner's retire() in progress
MAX_ENVELOPE_BYTES = 64 * 1024
# A batch puts the envelopes of the jobs it adds to one slot in one file: creating a file cost
# 16-75 µs of kernel time here (mostly the inode), more than the rest of a job's add.
BATCH_SUFFIX = ".batch.jsonl"
BATCH_MIN = 2  # jobs of one batch in one slot that get a batch file (one alone: <id>.json)
BATCH_MAX = 10_000  # envelopes in one batch file (a bigger share of a slot: several files)
BATCH_BYTES = 16 * 1024 * 1024  # and bytes: big payloads make smaller files
MAX_BATCH_BYTES = 64 * 1024 * 1024  # a batch file larger is refused (awty writes none)
_LINE_HEAD = b'{"v":%d,"id":"' % ENVELOPE_VERSION  # how each line awty writes begins
# O_NONBLOCK: opening a FIFO someone left in a slot must not wait for a writer (it is then
# refused as "not a regular file"); it changes nothing for regular files.
_OPEN_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
_NOT_A_DIR = (errno.ENOTDIR, errno.ELOOP)  # what O_NOFOLLOW|O_DIRECTORY says of a symlink


_QUOTE = json.encoder.encode_basestring_ascii  # json.dumps of a str, without dumps' checks


def _q(text: str | None) -> str:
    return "null" if text is None else _QUOTE(text)


def envelope_bytes(job: Job, isos: dict[datetime, str] | None = None) -> bytes:
    """What the slot tree holds for a job: enough to see (and re-import) it by hand. Built as
    text around the stored payload JSON, which is embedded as-is (no re-parse per job).
    ``isos``: instants already spelled, shared by a batch (its jobs share a few times)."""
    if isos is None:
        first, slot = iso(job.first_check_at), iso(job.next_check_at)
    else:
        first = isos.get(job.first_check_at) or isos.setdefault(job.first_check_at,
                                                                  iso(job.first_check_at))
        slot = isos.get(job.next_check_at) or isos.setdefault(job.next_check_at,
                                                                iso(job.next_check_at))
    head = (f'{{"v":{ENVELOPE_VERSION},"id":"{job.id}","kind":"{job.kind}",'
            f'"target":{_q(job.target)},"entity":{_q(job.entity_name)},'
            f'"key":{_q(job.entity_key)},"first_check_at":"{first}",'
            f'"next_check_at":"{slot}","check_count":{job.check_count},')
    if job.headers:
        head += f'"headers":{json.dumps(job.headers)},'
    return (head + f'"payload":{job.payload_json}}}').encode()


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


def batch_name_id(name: str) -> str | None:
    """The id a batch file is named by (its first job's), or None for any other name."""
    if name.endswith(BATCH_SUFFIX):
        stem = name[:-len(BATCH_SUFFIX)]
        return stem if is_id(stem) else None
    return None


def _known_name(name: str, here: set[str] | dict[str, Any]) -> bool:
    """An envelope (single or batch) named by an id in ``here``."""
    if name.endswith(".json"):
        return name[:-5] in here
    return name.endswith(BATCH_SUFFIX) and name[:-len(BATCH_SUFFIX)] in here


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


def _private_dirs(path: Path) -> None:
    """``mkdir -p`` whose every new directory is 0700 whatever the umask (``Path.mkdir`` makes
    the parents it creates with the umask's mode: a world-writable ``slots/`` under umask 0)."""
    if not path.parent.is_dir():
        _private_dirs(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _read_note(path: Path) -> str | None:
    try:
        fd = os.open(path, _OPEN_NOFOLLOW)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, REASON_LIMIT).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


# the detached removals this process started (reaped as they end)
_PURGES: list[subprocess.Popen[bytes]] = []


def _reap() -> None:
    _PURGES[:] = [p for p in _PURGES if p.poll() is None]


def wait_purged(timeout: float | None = None) -> None:
    """Wait for this process's background removals (tests, benchmarks)."""
    for p in list(_PURGES):
        p.wait(timeout)
    _reap()


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


REASON_LIMIT = 4096  # bytes of a .reason note read back


class SlotTree:
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

    def _ensure(self, sid: str) -> Path:
        """The slot's directory, made if missing; OSError ENOTDIR when it (or ``slots/``) is
        a symlink: files moved back into a slot never land outside the tree."""
        path = self.root / sid
        if sid not in self._made:
            _private_dirs(path)
            if not (_is_real_dir(str(self.root)) and _is_real_dir(str(path))):
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
        """These jobs' envelopes (all of one slot), one a line, in files of at most
        ``BATCH_MAX`` lines and ``BATCH_BYTES``, each ``<first-id>.batch.jsonl`` (the smallest
        of its ids: names sort by time) and written atomically as an envelope is: a reader
        sees every line or no file. A file goes once none of its jobs is pending in the slot
        (``settle_batches``, the reconciler, or with the slot's directory when it is
        retired)."""
        isos = {} if isos is None else isos
        sid = slot_id(jobs[0].next_check_at)
        lines: list[bytes] = []
        ids: list[str] = []
        size = 0
        for j in jobs:
            line = envelope_bytes(j, isos)
            if lines and (len(lines) >= BATCH_MAX or size + len(line) > BATCH_BYTES):
                self._put(sid, f"{min(ids)}{BATCH_SUFFIX}", b"\n".join(lines) + b"\n")
                lines, ids, size = [], [], 0
            lines.append(line)
            ids.append(j.id)
            size += len(line) + 1
        self._put(sid, f"{min(ids)}{BATCH_SUFFIX}", b"\n".join(lines) + b"\n")

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
            _private_dirs(self.home)
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
        """The envelopes of jobs added together: a slot given ``BATCH_MIN`` of them or more
        gets batch files (``write_batch``), a slot given one its ``<id>.json``."""
        isos: dict[datetime, str] = {}
        by_slot: dict[datetime, list[Job]] = {}
        for job in jobs:
            got = by_slot.get(job.next_check_at)
            if got is None:
                by_slot[job.next_check_at] = [job]
            else:
                got.append(job)
        n = 0
        for group in by_slot.values():
            if len(group) < BATCH_MIN:
                for job in group:
                    self.write(job, isos)
            else:
                self.write_batch(group, isos)
            n += len(group)
        return n

    def incoming_dirs(self) -> list[Path]:
        try:
            return sorted(self.incoming.iterdir())
        except FileNotFoundError:
            return []

    def remove(self, job_id: str, slot: datetime) -> bool:
        sid = slot_id(slot)
        with self.fd_lock:
            fd = self._fds.get(sid)
            try:
                if fd is None:
                    if not _is_real_dir(os.path.join(self.root, sid)):
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
            fd = os.open(self.root / slot_id(slot), _OPEN_DIR)
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
        """Take a finished slot's directory out of the tree in one rename, for
        ``purge_retired`` to delete. ``done`` are the ids whose envelopes may go with it, and
        those ``ended`` says have ended (other shards' work); any other file (dropped in while
        the slot ran) is moved back into a new slot directory.
        Returns how many were moved back. Raises OSError when the directory cannot be moved
        (nothing changed then)."""
        sid = slot_id(slot)
        self._forget(sid)
        _private_dirs(self.retired)
        if not _is_real_dir(str(self.retired)):
            raise OSError(errno.ENOTDIR, f"{self.retired} is not a directory")
        dest = self.retired / f"{sid}.{os.urandom(4).hex()}"
        try:
            os.rename(self.root / sid, dest)
        except FileNotFoundError:
            return 0
        # A batch file goes by its name's id, as an envelope does: the slot has no rows left,
        # and the file was awty's if its first job was (a drop-in names no job awty has).
        strangers = [n for n in os.listdir(dest) if not _known_name(n, done)]
        if strangers and ended is not None:
            # Another shard's finished envelopes (its own run removes them a moment later)
            # go with the slot: moved back, they would outlive that removal as orphans.
            named = [i for i in (n[:-5] if n.endswith(".json") else batch_name_id(n)
                                 for n in strangers) if i]
            gone = ended(named)
            strangers = [n for n in strangers if not _known_name(n, gone)]
        moved = 0
        if strangers:
            back = self._ensure(sid)
            for name in strangers:
                try:
                    os.rename(dest / name, back / name)
                    moved += 1
                except FileNotFoundError:
                    # another shard's runner removed its own finished envelope meanwhile
                    continue
        os.rename(dest, dest.with_name(dest.name + ".purge"))
        return moved

    def purge_retired(self) -> None:
        """Delete the retired slot directories without waiting for it: a detached ``rm -rf``
        (C, its own process: no GIL, and the caller may exit). Without ``rm``, in process."""
        _reap()
        if not _is_real_dir(str(self.retired)):
            return  # absent, or not ours to empty (a symlink is never followed)
        try:
            names = os.listdir(self.retired)
        except OSError:
            return  # left for doctor to report: the slots have run, that is what counts
        for name in names:  # a runner killed inside retire(): its files go back to the slot
            if _CUT_SHORT.fullmatch(name):
                try:
                    if file_time_now() - os.lstat(self.retired / name).st_ctime > CUT_SHORT_AGE:
                        self.restore_retired(self.retired / name)
                except (OSError, ValueError):
                    pass  # doctor reports it
        paths = [str(self.retired / n) for n in names if _PURGE.fullmatch(n)]
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

    def retired_dirs(self) -> list[Path]:
        try:
            return sorted(self.retired.iterdir())
        except FileNotFoundError:
            return []

    def restore_retired(self, path: Path) -> int:
        """Put back the files of a retirement cut short (a crash between its rename and its
        check): the slot's next run sorts them out (orphans go, drop-ins are imported)."""
        sid = path.name.split(".", 1)[0]
        parse_slot_id(sid)  # ValueError: not a directory awty retired
        back = self._ensure(sid)
        names = os.listdir(path)
        for name in names:
            os.rename(path / name, back / name)
        os.rmdir(path)
        return len(names)

    def remove_slot_if_empty(self, slot: datetime) -> bool:
        sid = slot_id(slot)
        self._forget(sid)
        try:
            os.rmdir(self.root / sid)
            return True
        except OSError:
            return False

    # -- reading --------------------------------------------------------------------------
    def names(self, slot: datetime) -> list[str]:
        """Every non-hidden file name in the slot directory, in no set order. A slot "directory"
        that is a symlink is not listed through (see ``set_aside_slot_link``)."""
        try:
            fd = os.open(self.slot_path(slot), _OPEN_DIR)
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
        return list(self.entries(slot, [n for n in names if not _known_name(n, here)]))

    def read(self, entry: Entry) -> dict[str, Any]:
        """Parse an envelope without following symlinks; raises ValueError with the reason."""
        return _object(_parse(self._raw(entry, MAX_ENVELOPE_BYTES)))

    def batch_ids(self, entry: Entry) -> list[str | None]:
        """The id of each line of a batch file (None: a line without one), read without
        parsing the lines awty wrote (each begins ``{"v":1,"id":"<id>"``). Raises ValueError
        with the reason (unreadable, too large, a line that is not a JSON object)."""
        out: list[str | None] = []
        for n, line in enumerate(self._raw(entry, MAX_BATCH_BYTES).splitlines(), 1):
            if line.startswith(_LINE_HEAD) and line[39:40] == b'"':
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
            fd = os.open(entry.path, _OPEN_NOFOLLOW)
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
        """Move a bad file out of the slot into ``rejected/<slot>/`` with a ``.reason`` note.
        Neither ``rejected/`` nor its slot directory is followed if it is a symlink (OSError)."""
        sid = slot_id(slot)
        dfd = private_dir_fd(self.home, "rejected", sid)
        try:
            # rename moves a symlink itself, never its target
            os.rename(entry.path, entry.name, dst_dir_fd=dfd)
            replace_in(dfd, entry.name + ".reason",
                       (reason + "\n").encode("utf-8", "backslashreplace"))
        finally:
            os.close(dfd)
        return self.rejected / sid / entry.name

    def rejected_files(self) -> list[Rejected]:
        """Every file set aside, oldest slot first, with its reason (for ``doctor``). Nothing
        under ``rejected/`` is followed through a symlink."""
        out: list[Rejected] = []
        try:
            slots = sorted(e.name for e in os.scandir(self.rejected)
                           if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
        except (FileNotFoundError, NotADirectoryError):
            return []
        for sid in slots:
            path = self.rejected / sid
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
