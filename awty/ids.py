"""Job ids: what an awty id looks like, how a typed one is normalised, and which shard runs it.
Pure and stdlib-only: the store, the runner and the slot tree all lean on it."""

from __future__ import annotations

import re
import zlib

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


# -- runner (lease owner) ids: "host:pid:nonce" ----------------------------------------------
def new_owner() -> str:
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


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
