"""Job ids: making one (``new_id``), what an awty id looks like, how a typed one is normalised,
and which shard runs it. Pure and stdlib-only: the store, the runner and the slot tree all lean
on it."""

from __future__ import annotations

import _thread
import os
import re
import zlib
from functools import lru_cache

TYPE_CHECKING = False  # typing costs `awty add` ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from datetime import datetime

# A ULID in Crockford base32 (no I, L, O, U): 26 characters, time first (a job's first due time).
ID_CHARS = "0-9A-HJKMNP-TV-Z"
ID = re.compile(rf"[{ID_CHARS}]{{26}}")
ID_PREFIX = re.compile(rf"[{ID_CHARS}]{{1,26}}")
MIN_PREFIX = 6  # shortest prefix `show`, `cancel`… accept for an id


def is_id(text: str) -> bool:
    return ID.fullmatch(text) is not None


def normalise(text: str) -> str:
    """What a user typed, as stored ids are spelled (upper case, surrounding blanks gone).
    Raises ValueError for what no id can be: undecodable argv bytes (surrogateescape), NUL and
    other control characters, or more than a line of text; a store would fail on some of them
    (SQLite cannot encode a lone surrogate, PostgreSQL takes no NUL) rather than find nothing."""
    job_id = text.strip().upper()
    if not job_id.isprintable() or len(job_id) > _MAX_TYPED:
        shown = repr(text) if len(text) <= 40 else repr(text[:30]) + "…"
        raise ValueError(f"{shown} is not a job id ({_ID_SHAPE})")
    return job_id


_MAX_TYPED = 100
_ID_SHAPE = (f"26 letters and digits, e.g. 01JD3V6Z1X4Q8R2M5N7P9T0W3Y, or its first {MIN_PREFIX} "
             "or more")


def shard_of(job_id: str, count: int) -> int:
    """Which of ``count`` shards (0-based) runs a job: a stable hash of its id, the same in
    every process and every store."""
    return zlib.crc32(job_id.encode()) % count


# -- making a job id: a ULID of its first due time ---------------------------------------
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # 10 bits -> 2 characters
_LOW = range(70, -10, -10)  # the random part's pairs (bits 0-79)
_heads: dict[int, str] = {}  # ms -> its ids' first ten characters (``_head``)


_random = bytearray()  # os.urandom bytes not yet used: one system call per 400 ids, not each
# The random part last given for a millisecond, per millisecond: ids of one due time that this
# process makes go up in the order they are made (ULID's monotonic mode, by a random step).
_last: dict[int, int] = {}
_lock = _thread.allocate_lock()  # _thread: built in, no import cost on `awty add`
# Moments whose last part is kept (a few MB at most). A long-lived process (serve) or a
# batch of jobs at many moments outgrows it; forgetting all at once, a batch that came back to
# a moment after 4,096 others drew a fresh part below the ids it had made for it.
_MOMENTS = 1 << 16
_STEP_BITS = 32
_FRESH_BITS = 79  # a fresh random part leaves 2**79 of room above it for steps
_TOP = (1 << 80) - 1


def _forget_after_fork() -> None:
    # A forked child would otherwise draw the parent's unused random bytes and step on from
    # its last parts: both would make the same ids. Its lock is new: a thread of the parent
    # may have held it at the fork.
    global _lock
    _lock = _thread.allocate_lock()
    _random.clear()
    _last.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _forget_older() -> None:
    """Keep the half of ``_last`` used last (callers take a moment out and put it back)."""
    keep = list(_last.items())[len(_last) // 2:]
    _last.clear()
    _last.update(keep)


def _take(nbytes: int) -> int:
    if len(_random) < nbytes:
        _random[:] = os.urandom(4000)
    r = int.from_bytes(_random[-nbytes:], "big")
    del _random[-nbytes:]
    return r


def new_id(at: datetime) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, in Crockford base32 (26
    characters). Jobs take ``at`` = their first due time, not the time they were added: a
    slot's ids are then adjacent in every index keyed by id, so a run deletes and records its
    jobs in a few neighbouring pages, not one page per job scattered across a large home. Text
    order is the deterministic firing order within a slot.

    Ids of one millisecond made by one process go up in the order they are made (the random
    part grows by a random step of up to 32 bits): jobs due at the same moment fire in the
    order they were added, and a run meets them in the order their entity keys were given.
    Keys given in order (order numbers, say) then sit in that order in the entity indexes
    too, and a run writes them in neighbouring index pages, not one page per job. (What each
    of these saved: BENCHMARKS.md, "Performance history".)"""
    return new_id_ms(int(at.timestamp() * 1000))


def new_id_ms(ms: int) -> str:
    """``new_id`` of the moment ``ms`` (milliseconds since the epoch), for a caller that has
    it already (a batch's jobs share a few moments)."""
    with _lock:  # threads adding at once: without it they drew the same bytes (same ids)
        r = _last[ms] = _after(_taken_out(ms))
    return _head(ms) + "".join([_PAIRS[(r >> s) & 1023] for s in _LOW])


def _taken_out(ms: int) -> int | None:
    """The last random part made for ``ms`` (None: none kept), taken out of ``_last``: its
    caller puts the next back last, the dict's order being the order of use. Under ``_lock``."""
    prev = _last.pop(ms, None)
    if prev is None and len(_last) >= _MOMENTS:
        _forget_older()
    return prev


def _after(prev: int | None) -> int:
    """The random part after ``prev``: a random step above it, or a fresh one when there is
    none or too little room is left above it for a step. Under ``_lock``."""
    if prev is None or prev >= _TOP - (1 << _STEP_BITS):
        return _take(10) >> (80 - _FRESH_BITS)
    return prev + 1 + _take(4)


def _head(ms: int) -> str:
    """The first ten characters of an id of ``ms`` (bits 80-129: five whole pairs), the same
    for all its ids: made once per moment, a batch's jobs share a few (``add_many``)."""
    head = _heads.get(ms)
    if head is None:
        if len(_heads) >= 4096:
            _heads.clear()
        head = _heads[ms] = "".join([_PAIRS[(ms >> s) & 1023] for s in range(40, -10, -10)])
    return head


def new_ids(at: datetime, n: int) -> list[str]:
    """``n`` ids of ``at``, as ``n`` calls of ``new_id`` would make them (going up in the order
    given), taken under one lock: a claim re-arming many schedules of one slot makes an id for
    each next occurrence (issue 32). A step is at most 33 bits, so ids made in turn share the
    characters of bits 40-79 for ~500 ids at a time: spelled once each time they change."""
    if n <= 0:
        return []
    import struct  # a claim's only: `awty add` imports neither
    from itertools import accumulate

    ms = int(at.timestamp() * 1000)
    with _lock:
        prev = _taken_out(ms)
        if prev is not None and prev < _TOP - ((n + 1) << _STEP_BITS):
            # No step can reach the top (where ``_after`` starts afresh): each is ``_after``'s,
            # 1 + four random bytes, all drawn at once and summed in C.
            steps = struct.unpack(f">{n}I", os.urandom(4 * n))
            parts = list(accumulate(map((1).__add__, steps), initial=prev))[1:]
        else:
            parts = []
            for _ in range(n):
                prev = _after(prev)
                parts.append(prev)
        _last[ms] = parts[-1]
    head = _head(ms)
    pairs = _PAIRS
    out = []
    top = -1
    start = head
    for r in parts:
        if r >> 40 != top:
            top = r >> 40
            start = head + "".join([pairs[(top >> s) & 1023] for s in (30, 20, 10, 0)])
        out.append(start + pairs[(r >> 30) & 1023] + pairs[(r >> 20) & 1023]
                   + pairs[(r >> 10) & 1023] + pairs[r & 1023])
    return out


# -- runner (lease owner) ids: "host:pid:nonce" ----------------------------------------------
def new_owner() -> str:
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


@lru_cache(maxsize=16)  # a run ends each job under its one owner id: ~190 ns a job spared
def runner_host_pid(owner: str | None) -> tuple[str | None, int | None]:
    """The host name and process id in an owner id (``new_owner``'s); (None, None) for an
    owner of another shape."""
    host, _, rest = (owner or "").rpartition(":")
    host, _, pid = host.rpartition(":")
    return (host, int(pid)) if host and pid.isdigit() else (None, None)


def runner_label(owner: str | None) -> str:
    """``runner pid N`` from an owner id, for messages."""
    parts = (owner or "").split(":")
    if len(parts) >= 3 and parts[-2].isdigit():
        return f"runner pid {parts[-2]}"
    return f"runner {owner}" if owner else "a runner"
