"""SQLite side of export / import: streaming every pending job and history row out, and
history rows in (``portable`` says what a row is)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator

from ..model import Job
from ..slots import iso
from .jobdict import payload_of, payload_only, whole_job
from .portable import HISTORY_KEYS, TIME_KEYS
from .sqlite_rows import FINGERPRINT, HISTORY_COLUMNS, SELECT_JOB, opt_time, row_to_job

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

_SELECT_HISTORY = "SELECT " + ", ".join(HISTORY_COLUMNS) + " FROM job_history ORDER BY seq"


def export_pending(conn: sqlite3.Connection) -> Iterator[tuple[Job, str | None]]:
    for r in conn.execute(SELECT_JOB + " ORDER BY next_check_at, id"):
        yield row_to_job(r), r[FINGERPRINT]


def export_history(conn: sqlite3.Connection) -> Iterator[dict[str, Any]]:
    for r in conn.execute(_SELECT_HISTORY):
        d = dict(zip(HISTORY_COLUMNS, r))
        doc = d.pop("job")
        for k in TIME_KEYS:
            d[k] = opt_time(d[k])
        d["payload"] = payload_of(doc)
        d["job"] = whole_job(doc)
        yield {k: d[k] for k in HISTORY_KEYS}


def history_values(rows: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for d in rows:
        d = dict(d)
        for k in TIME_KEYS:
            d[k] = iso(d[k]) if d[k] is not None else None
        d["job"] = d["job"] or payload_only(d["payload"])
        yield tuple(d.get(c) for c in HISTORY_COLUMNS)
