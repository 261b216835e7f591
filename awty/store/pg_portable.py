"""PostgreSQL side of export / import: every pending job and history row streamed out through
server-side cursors, history rows in through binary COPY (``portable`` says what a row is)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .pg_rows import sec
from .pg_sql import HISTORY_COLUMNS, JOB_COLUMNS
from .portable import HISTORY_KEYS, TIME_KEYS

_PENDING = (f"SELECT {', '.join(JOB_COLUMNS)}, fingerprint FROM {{s}}.future_job "
            "ORDER BY next_check_at, id")
_HISTORY = f"SELECT {', '.join(HISTORY_COLUMNS)} FROM {{s}}.job_history ORDER BY seq"


def selects(schema: str) -> tuple[str, str]:
    """The pending-jobs and history exports for ``schema`` (quoted as ``pg_sql.Sql`` does)."""
    quoted = '"' + schema.replace('"', '""') + '"'
    return _PENDING.replace("{s}", quoted), _HISTORY.replace("{s}", quoted)


def history_record(r: tuple[Any, ...]) -> dict[str, Any]:
    d = dict(zip(HISTORY_COLUMNS, r))
    return {k: d[k] for k in HISTORY_KEYS}


def history_values(rows: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for d in rows:
        d = {**d, **{k: sec(d[k]) for k in TIME_KEYS}}
        yield tuple(d.get(c) for c in HISTORY_COLUMNS)
