"""Rendering for the CLI: plain lines, tables (``tables``), Rich progress, and ``--json``
documents. Rich is imported only by the progress bar, so that no other command pays for it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime

from ..documents import execution_dict as execution_dict
from ..documents import history_dict as history_dict
from ..documents import job_dict as job_dict
from ..documents import redact_headers as redact_headers
from ..documents import JobView
from ..documents import show_document as show_document
from ..model import Execution, HistoryRow, Job
from ..slots import iso, slot_id

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

    from ..api import AddResult
    from .tables import Col

    Rows = Iterable[list[Any]] | Callable[[], Iterable[list[Any]]]


def when(at: datetime | None, utc: bool = False, short: bool = False) -> str:
    if at is None:
        return "-"
    if short:
        return (at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if utc
                else at.astimezone().strftime("%Y-%m-%d %H:%M %Z"))
    if utc:
        return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def emit_json_rows(rows: Iterable[dict[str, Any]]) -> None:
    """A JSON array written as the rows come, never held whole (a read of a million jobs held
    6.4 GB as one document): the very text ``emit_json`` gives for the list."""
    from itertools import islice

    rows = iter(rows)
    write = sys.stdout.write
    first = True
    # A thousand rows an encoding: one per row cost a quarter more time (the encoder's set-up).
    while chunk := list(islice(rows, 1000)):
        # at indent 2 a list is "[\n  {…},\n  {…}\n]": its rows as inside the whole array
        write(("[\n" if first else ",\n") + _INDENTED(chunk)[2:-2])
        first = False
    write("[]\n" if first else "\n]\n")


# Built once: json.dumps with options builds an encoder per call.
_INDENTED = json.JSONEncoder(indent=2, ensure_ascii=False, default=str).encode


def added(results: list[AddResult], utc: bool, as_json: bool) -> None:
    if as_json:
        docs = [{"id": r.job.id, "slot": slot_id(r.slot), "next_check_at": iso(r.slot),
                 "first_check_at": iso(r.job.first_check_at), "kind": r.job.kind.value,
                 "payload": r.job.payload, "created": r.created, "dry_run": r.dry_run}
                for r in results]
        emit_json(docs[0] if len(docs) == 1 else docs)
        return
    if len(results) > 3:
        new = sum(r.created for r in results)
        # each distinct slot spelled once: a batch's 100,000 jobs share ~100 (strftime ~0.3 µs)
        slots = sorted({slot_id(at) for at in {r.job.next_check_at for r in results}})
        verb = "would add" if results[0].dry_run else "added"
        out(f"{verb} {new} job(s) in {len(slots)} slot(s) ({slots[0]} … {slots[-1]})"
            + (f"; {len(results) - new} already existed" if new < len(results) else ""))
        return
    for r in results:
        j = r.job
        head = ("dry run: would add" if r.dry_run else
                "added" if r.created else "exists (same idempotency key)")
        out(f"{head} {j.id}")
        out(f"  due   {when(j.first_check_at, True)}  ({when(j.first_check_at)})")
        out(f"  slot  {slot_id(r.slot)}  fires {when(r.slot, utc)}")


def table(title: str | None, columns: Sequence[Col | str], rows: Rows) -> None:
    """Plain aligned columns (``tables``): fitted to a terminal, whole in a pipe. ``rows``
    may be a function giving them afresh: they are then read twice, first for the column
    widths, and never held (``list --all`` over a million jobs stays flat)."""
    import os
    import shutil

    from .tables import cell, col, lines, natural_widths

    again = rows if callable(rows) else _held(rows)
    cols = [col(c, i == len(columns) - 1) for i, c in enumerate(columns)]

    def cells() -> Iterator[list[str]]:
        return ([cell(v) for v in r] for r in again())

    natural = natural_widths(cols, cells())
    if natural is None:
        out("(none)")
        return
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if tty else None  # COLUMNS first
    bold = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    if title:
        out(title)
    for line in lines(cols, cells(), natural, width, bold):
        out(line)


def _held(rows: Iterable[Any]) -> Callable[[], Iterable[Any]]:
    held = list(rows)
    return lambda: held


def jobs_table(jobs: Callable[[], Iterable[Job]], utc: bool) -> None:
    """``jobs``: a function giving them afresh (read twice, see ``table``)."""
    from .tables import Col

    table(None, ["id", "slot (fires)", Col("kind", drop=2), Col("target", drop=4, cut=16),
                 Col("entity/key", drop=3, cut=10), Col("checks", drop=1), "status"],
          lambda: ([j.id, when(j.next_check_at, utc, True), j.kind.value, j.target,
                    f"{j.entity_name or '-'}/{j.entity_key or '-'}", j.check_count,
                    j.status.value + (f" (attempt {j.attempt})" if j.attempt else "")]
                   for j in jobs()))


def history_table(rows: Callable[[], Iterable[HistoryRow]], utc: bool,
                  failed: bool = False) -> None:
    """``rows``: a function giving them afresh (read twice, see ``table``). With ``failed``,
    the error (its first line) outlasts target and reason on a narrow terminal; otherwise it
    goes first."""
    from .tables import Col

    table(None, ["ended", "id", "outcome", Col("reason", drop=4, cut=12),
                 Col("checks", drop=1), Col("attempts", drop=2), Col("target", drop=3, cut=16),
                 Col("error", drop=5 if failed else 0, cut=20)],
          lambda: ([when(h.ended_at, utc, True), h.id, h.outcome.value, h.reason, h.checks,
                    h.attempts, h.target, first_line(h.error)] for h in rows()))


def show_job(view: JobView, events: list[Execution], utc: bool) -> None:
    """``show``'s text: ``add``'s and ``list``'s words and times, one status line, the values
    in one column, then the executions and what the last one printed."""
    found = view.ended
    if view.job is None:
        h = found[-1]
        status = h.outcome.value + (f": {first_line(h.reason)}" if h.reason else "")
        rows: list[tuple[str, Any]] = [
            ("id", h.id), ("status", status), ("kind", h.kind.value), ("target", h.target),
            ("entity", _entity(h.entity_name, h.entity_key)),
            ("schedule", h.schedule), ("due", when(h.first_check_at, utc)),
            ("ended", when(h.ended_at, utc) + (f"  by {h.host} pid {h.pid}" if h.host else "")),
            ("checks", h.checks), ("attempts", h.attempts),
            ("error", first_line(h.error) if h.error and h.error != h.reason else None),
            ("payload", _payload(h.payload_json)),
            ("added", when(h.created_at, utc) if h.created_at else None),
            ("earlier", f"ended {len(found) - 1} time(s) before, re-armed by retry"
             if len(found) > 1 else None)]
        output = h.output
    else:
        j = view.job
        rows = [
            ("id", j.id), ("status", _pending_status(j, utc)), ("kind", j.kind.value),
            ("target", j.target), ("entity", _entity(j.entity_name, j.entity_key)),
            ("schedule", j.schedule and f"{j.schedule}, occurrence {when(j.occurrence, utc)}"),
            ("due", when(j.first_check_at, utc)),
            ("slot", f"{slot_id(j.next_check_at)}  fires {when(j.next_check_at, utc)}"),
            ("checks", j.check_count), ("attempts", j.attempt),
            ("payload", _payload(j.payload_json)),
            ("headers", json.dumps(redact_headers(j.headers)) if j.headers else None),
            ("added", when(j.created_at, utc) if j.created_at else None)]
        output = None
    kv([(k, v) for k, v in rows if v is not None])
    if events:
        table(None, ["at", "slot", "check", "attempt", "answer", "status", "ms", "runner",
                     "error"],
              ([when(e.at, utc), e.slot, e.check, e.attempt, e.answer.value, e.status,
                e.duration_ms, f"{e.host} pid {e.pid}" if e.host else "-", e.error]
               for e in events))
    if output:
        # what the job printed (exec) or answered (http), as `at` mails it: verbatim
        out("output of the last execution:")
        out(output.rstrip("\n"))


def _pending_status(j: Job, utc: bool) -> str:
    from ..ids import runner_label

    if j.status.value == "in_flight":
        lease = f", lease until {when(j.lease_until, utc)}" if j.lease_until else ""
        return f"being delivered now ({runner_label(j.lease_owner)}{lease})"
    return "pending" + (f"; the last attempt failed: {first_line(j.last_error)}"
                        if j.last_error else "")


def _entity(name: str | None, key: str | None) -> str | None:
    return None if name is None else name + (f"/{key}" if key is not None else "")


def _payload(payload_json: str | None) -> str:
    return json.dumps(json.loads(payload_json)) if payload_json is not None else "null"


_DRY_RUN = {"would_fire": "would fire", "misfired": "would end expired (misfired)",
            "would_skip": "would end skipped (missed policy)",
            "occurrences_skipped": "missed occurrence(s) would be skipped",
            "missed_would_fire": "missed occurrence(s) would fire in the next slot"}


def dry_run_outcomes(outcomes: dict[str, int]) -> str:
    """A dry run's counts in words: ``2 would fire, 1 would end expired (misfired)``."""
    return ", ".join(f"{n} {_DRY_RUN.get(k, k)}" for k, n in sorted(
        outcomes.items(), key=lambda kv: list(_DRY_RUN).index(kv[0]) if kv[0] in _DRY_RUN
        else len(_DRY_RUN))) or "nothing to fire"


def dry_run_line(d: dict[str, Any]) -> str:
    """One slot of a dry run (``run-slot --dry-run``, each slot of ``catchup --dry-run``)."""
    return (f"slot {d['slot']}: {dry_run_outcomes(d['outcomes'])}"
            + (f", {d['imported']} file(s) to import" if d.get("imported") else ""))


def first_line(text: str | None) -> str | None:
    return text.strip().splitlines()[0] if text and text.strip() else None


def kv(pairs: list[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in pairs)
    for k, v in pairs:
        out(f"{k.ljust(width)}  {'-' if v is None else v}")


def summary_line(d: dict[str, Any]) -> str:
    outcomes = ", ".join(f"{v} {k}" for k, v in sorted(d.get("outcomes", {}).items())) or "nothing"
    extra = [f"{d[k]} {k}" for k in ("rechecked", "retried", "deferred", "imported",
                                      "rejected") if d.get(k)]
    return (f"slot {d['slot']}: ran {d['ran']} in {d['seconds']:.2f}s: {outcomes}"
            + (f"; {', '.join(extra)}" if extra else ""))


class Progress:
    """Rich progress bars fed by the runner's ``on_event`` callback (TTY only): one per slot
    under way (a catch-up's next slot starts while the one before ends)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, \
            TextColumn, TimeElapsedColumn

        self._p = RichProgress(TextColumn("{task.description}"), BarColumn(),
                               MofNCompleteColumn(), TimeElapsedColumn(), transient=True)
        self._tasks: dict[str, Any] = {}  # slot id -> its bar

    def __enter__(self) -> Progress:
        self._p.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._p.__exit__(exc_type, exc, tb)

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "slot_start":
            self._tasks[data["slot"]] = self._p.add_task(f"slot {data['slot']}",
                                                         total=data["total"] or None)
        elif kind == "job":
            if (task := self._tasks.get(data.get("slot", ""))) is not None:
                self._p.advance(task)
        elif kind == "slot_end":
            if (task := self._tasks.pop(data["slot"], None)) is not None:
                self._p.remove_task(task)
