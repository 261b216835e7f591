"""The SQLite store's read-only reports: ``stats``, ``leases`` and ``check``.

Everything is computed in SQL (counts, GROUP BY, the percentiles' ranks picked from one sorted
read), so the cost does not depend on holding rows in memory."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime

from ..model import Answer, Durations, LeaseGroup, StoreHealth, StoreStats
from ..slots import from_iso, iso, parse_slot_id
from . import rules
from .sqlite_rows import EXECUTIONS_SINCE

TYPE_CHECKING = False  # typing costs `awty add` ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

Alive = Callable[[str | None], bool | None]


def leases(conn: sqlite3.Connection, now: datetime, alive: Alive) -> list[LeaseGroup]:
    rows = conn.execute(
        "SELECT owner, count(*), coalesce(sum(until IS NULL OR until <= ?), 0), max(until) "
        "FROM job_lease GROUP BY owner ORDER BY owner", (iso(now),)).fetchall()
    return [LeaseGroup(owner=o, jobs=n, expired=x, alive=alive(o), ends=from_iso(e) if e else None)
            for o, n, x, e in rows]


def last_fired(conn: sqlite3.Connection) -> tuple[datetime, datetime] | None:
    # Primary-key ranges of the newest events and history rows (which hold executions folded
    # into them), not a scan of the whole log.
    row = conn.execute(
        "SELECT slot, min(at) FROM (SELECT * FROM (SELECT slot, at FROM job_event ORDER BY seq "
        "DESC LIMIT 10000) UNION ALL SELECT * FROM (SELECT exec_slot AS slot, exec_at AS at "
        "FROM job_history ORDER BY seq DESC LIMIT 10000) WHERE at IS NOT NULL) GROUP BY slot "
        "ORDER BY slot DESC LIMIT 1").fetchone()
    if not row or not row[0]:
        return None
    return parse_slot_id(row[0]), from_iso(row[1])


# Every answer an execution can give (``Answer``), each counted in the one pass over the window
_ANSWER_SUMS = "".join(f", coalesce(sum(answer = '{a.value}'), 0)" for a in Answer)
# stats' lateness ranks (0-based): the median's one or two, (n - 1) / 2 and n / 2, as the least
# and greatest of the rows at them; the 99th percentile's, math.ceil(0.99 * n) - 1 (in integers:
# 0.99 * n is 99 * n / 100 to the double), counted from the top: a sort that keeps only the top
# 1% (LIMIT), where a window over every row (row_number) cost ~110 ms more for 200,000
_L = "SELECT l FROM e WHERE l IS NOT NULL ORDER BY l"
_RANKS = (f"(SELECT min(l), max(l) FROM ({_L} LIMIT (SELECT n / 2 - (n - 1) / 2 + 1 FROM c) "
          f"OFFSET (SELECT (n - 1) / 2 FROM c))), (SELECT ({_L} DESC LIMIT 1 "
          "OFFSET (SELECT n - (99 * n + 99) / 100 FROM c)))")
# a run: one runner process's executions of one slot
_RUNS = "SELECT max(t + coalesce(duration_ms, 0)) - min(t) AS d FROM e GROUP BY slot, host, pid"


def _histogram(d: str, bounds: Sequence[float]) -> str:
    return "".join(f"coalesce(sum({d} <= {float(b)!r}), 0), " for b in bounds) + (
        f"count({d}), coalesce(sum({d}), 0)")


def _window(conn: sqlite3.Connection, since: str, figures: bool,
            bounds: tuple[Sequence[float], Sequence[float]] | None) -> tuple[Any, ...]:
    """One statement over the window's executions, read once (an index range and a row lookup
    each, from two tables: most of a scrape's cost) into ``e``, as one row: ``stats``' figures
    when ``figures`` (the three lateness ranks, then the counts), then the two histograms of
    ``durations`` when ``bounds``."""
    cols, sums, parts = [], [], []
    if figures:
        cols.append("attempt, answer, lateness_ms AS l")
        sums.append(f"count(*), coalesce(sum(attempt > 1), 0), count(l) AS n, max(l)"
                    f"{_ANSWER_SUMS}")
        parts.append(_RANKS)
    parts.append("c")
    if bounds:
        # each start's milliseconds computed once (julianday: milliseconds are kept)
        cols.append("slot, host, pid, julianday(at) * 86400000.0 AS t, duration_ms")
        sums.append(_histogram("duration_ms", bounds[0]))
        parts.append(f"(SELECT {_histogram('d', bounds[1])} FROM ({_RUNS}))")
    row: tuple[Any, ...] = conn.execute(
        f"WITH e AS MATERIALIZED (SELECT {', '.join(cols)} FROM {EXECUTIONS_SINCE}), "
        f"c AS MATERIALIZED (SELECT {', '.join(sums)} FROM e) SELECT * FROM {', '.join(parts)}",
        (since,)).fetchone()
    return row


def durations(conn: sqlite3.Connection, since: datetime, executions_ms: Sequence[float],
              runs_ms: Sequence[float]) -> tuple[Durations, Durations]:
    row = _window(conn, iso(since), False, (executions_ms, runs_ms))
    return rules.histograms(row, executions_ms)


def _counts(conn: sqlite3.Connection, sql: str, *params: object) -> dict[str, int]:
    return {k: n for k, n in conn.execute(sql, params)}


def stats(conn: sqlite3.Connection, alive: Alive, *, now: datetime, since: datetime,
          current: datetime, next_slots: int) -> StoreStats:
    return _stats(conn, alive, now, since, current, next_slots, None)[0]


def stats_and_durations(conn: sqlite3.Connection, alive: Alive, *, now: datetime,
                        since: datetime, current: datetime, next_slots: int,
                        executions_ms: Sequence[float], runs_ms: Sequence[float]
                        ) -> tuple[StoreStats, Durations, Durations]:
    st, rest = _stats(conn, alive, now, since, current, next_slots, (executions_ms, runs_ms))
    return (st, *rules.histograms(rest, executions_ms))


def _stats(conn: sqlite3.Connection, alive: Alive, now: datetime, since: datetime,
           current: datetime, next_slots: int,
           bounds: tuple[Sequence[float], Sequence[float]] | None
           ) -> tuple[StoreStats, Sequence[Any]]:
    """``Store.stats``, and what ``_window`` gives after its figures (the histograms of
    ``bounds``, from the same one read of the window's executions)."""
    q = conn.execute
    cur, since_s = iso(current), iso(since)
    upcoming = q("SELECT next_check_at, count(*) FROM future_job WHERE next_check_at >= ? "
                 "GROUP BY next_check_at ORDER BY next_check_at LIMIT ?",
                 (cur, next_slots)).fetchall()
    past_jobs, past_slots = q("SELECT count(*), count(DISTINCT next_check_at) FROM future_job "
                              "WHERE next_check_at < ?", (cur,)).fetchone()
    # A job is pending or in flight (``Status``): the table's count (the smallest index's size)
    # less the leases' (a job's lease goes with it), not a scan of every row for its status.
    in_flight = q("SELECT count(*) FROM job_lease").fetchone()[0]
    pending = q("SELECT count(*) FROM future_job").fetchone()[0] - in_flight
    stale = sum(g.expired for g in leases(conn, now, alive) if g.alive is not True)
    lo_l, hi_l, p99, total, retries, n, top, *rest = _window(conn, since_s, True, bounds)
    answered = rest[:len(Answer)]
    by_answer = {a.value: k for a, k in zip(Answer, answered, strict=True) if k}
    if sum(answered) != total:  # an answer this version does not know: count them all
        by_answer = _counts(conn, f"SELECT answer, count(*) FROM {EXECUTIONS_SINCE} "
                                  "GROUP BY answer ORDER BY answer", since_s)
    median = None
    if n:
        median = (float(lo_l) + float(hi_l)) / 2 if n % 2 == 0 else float(lo_l)
        p99 = float(p99)
    return StoreStats(
        pending=pending, in_flight=in_flight, stale_leases=stale,
        by_kind=_counts(conn, "SELECT kind, count(*) FROM future_job GROUP BY kind ORDER BY kind"),
        next_slots=[(from_iso(s), c) for s, c in upcoming],
        past_slots=past_slots, past_jobs=past_jobs,
        outcomes=_counts(conn, "SELECT outcome, count(*) FROM job_history WHERE ended_at >= ? "
                               "GROUP BY outcome ORDER BY outcome", since_s),
        executions=total, by_answer=dict(sorted(by_answer.items())),
        retries=retries, failures=by_answer.get("retry", 0) + by_answer.get("fail", 0),
        lateness_count=n, lateness_median_ms=median, lateness_p99_ms=p99,
        lateness_max_ms=top if n else None,
    ), rest[len(Answer):]


def check(conn: sqlite3.Connection, version: int, expected: int) -> StoreHealth:
    try:
        problems = [r[0] for r in conn.execute("PRAGMA integrity_check(20)")]
    except sqlite3.Error as e:
        return StoreHealth(False, version, f"PRAGMA integrity_check: {e}", (str(e),), expected)
    if problems == ["ok"]:
        return StoreHealth(True, version, "PRAGMA integrity_check: ok", (), expected)
    return StoreHealth(False, version, "PRAGMA integrity_check: " + "; ".join(problems[:5])
                       + " — restore a backup or rebuild with `sqlite3 awty.db .recover`",
                       tuple(problems), expected)
