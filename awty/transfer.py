"""Moving a home between stores (SQLite <-> PostgreSQL): ``export`` writes JSON lines, pending
jobs first, then history, then a last line with the counts; ``load`` checks those counts, that
the target holds nothing yet, and that every row arrived. The stores do the reading and writing
(``Store.export_pending``, ``export_history``, ``add``, ``import_history``); this module only
turns records into lines and back. Executions (the per-attempt log) are not moved.

A job in flight at export is written as pending: stop the runners before moving a home, or its
callback may be sent once by the old home and once by the new one."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from .errors import InvalidInput, StoreError
from .model import Job, Kind, Status
from .slots import from_iso, iso
from .slotdir import SlotTree
from .store.base import Store
from .store.portable import HISTORY_KEYS, TIME_KEYS

FORMAT = "awty-export/1"
_JOB_FIELDS = Job._fields
_JOB_TIMES = ("first_check_at", "next_check_at", "created_at", "updated_at", "lease_until",
              "started_at")


@dataclass(frozen=True)
class Moved:
    jobs: int
    history: int

    def to_dict(self) -> dict[str, int]:
        return {"jobs": self.jobs, "history": self.history}


def export(store: Store, out: IO[str]) -> Moved:
    """Write the store's pending jobs and history to ``out``; memory stays flat."""
    out.write(json.dumps({"format": FORMAT}) + "\n")
    jobs = history = 0
    for job, fp in store.export_pending():
        out.write(json.dumps({"job": _job_doc(as_pending(job)), "fingerprint": fp}) + "\n")
        jobs += 1
    for row in store.export_history():
        out.write(json.dumps({"history": _history_doc(row)}) + "\n")
        history += 1
    out.write(json.dumps({"end": {"jobs": jobs, "history": history}}) + "\n")
    return Moved(jobs, history)


def load(store: Store, tree: SlotTree | None, where: str, lines: Iterable[str]) -> Moved:
    """Import an export into ``store``, which must be empty (``where`` names it in messages;
    ``tree``, when the home has one, gets the jobs' envelopes). All jobs or none (one ``add``),
    then all history or none; the counts on the export's last line must match what was read,
    and the store's counts what was written."""
    jobs, fps, rows, end = _read(lines)
    held = store.count()
    if held or store.history(limit=1):
        raise InvalidInput(f"import needs an empty store: {where} already holds "
                           f"{held} pending job(s) or history")
    added = store.add(jobs, fps) if jobs else []
    made = [x.job for x in added if x.created]
    if len(made) != len(jobs):
        raise StoreError(f"import: {len(jobs)} job(s) read, {len(made)} added")
    n_history = store.import_history(rows) if rows else 0
    got = Moved(store.count(), n_history)
    if got != end:
        raise StoreError(f"import: the export lists {end.jobs} job(s) and {end.history} "
                         f"history row(s); the store now holds {got.jobs} and {got.history}")
    if tree is not None:
        tree.write_many(made)
    return got


def as_pending(job: Job) -> Job:
    return job.replace(status=Status.PENDING, lease_owner=None, lease_until=None,
                       started_at=None)


# --- lines <-> records -----------------------------------------------------------------------
def _read(lines: Iterable[str]) -> tuple[list[Job], list[str | None], list[dict[str, Any]],
                                        Moved]:
    jobs: list[Job] = []
    fps: list[str | None] = []
    rows: list[dict[str, Any]] = []
    end: Moved | None = None
    for n, line in _numbered(lines):
        try:
            doc = json.loads(line)
            if n == 1:
                if doc.get("format") != FORMAT:
                    raise ValueError(f"not an awty export (first line: {line[:60]!r})")
                continue
            if end is not None:
                raise ValueError("lines after the end line")
            if "job" in doc:
                jobs.append(_job_from(doc["job"]))
                fps.append(doc.get("fingerprint"))
            elif "history" in doc:
                rows.append(_history_from(doc["history"]))
            elif "end" in doc:
                end = Moved(int(doc["end"]["jobs"]), int(doc["end"]["history"]))
            else:
                raise ValueError("neither a job, a history row nor the end line")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise InvalidInput(f"line {n}: {e}") from None
    if end is None:
        raise InvalidInput("the export has no end line: it was cut short")
    if (len(jobs), len(rows)) != (end.jobs, end.history):
        raise InvalidInput(f"the export lists {end.jobs} job(s) and {end.history} history "
                           f"row(s) but holds {len(jobs)} and {len(rows)}")
    return jobs, fps, rows, end


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    n = 0
    for line in lines:
        if line.strip():
            n += 1
            yield n, line
    if n == 0:
        raise InvalidInput("the export is empty")


def _job_doc(job: Job) -> dict[str, Any]:
    d = {k: getattr(job, k) for k in _JOB_FIELDS}
    d["kind"], d["status"] = job.kind.value, job.status.value
    for k in _JOB_TIMES:
        d[k] = iso(d[k]) if d[k] is not None else None
    return d


def _job_from(d: dict[str, Any]) -> Job:
    unknown = set(d) - set(_JOB_FIELDS)
    if unknown:
        raise ValueError(f"unknown job field(s) {sorted(unknown)}")
    d = dict(d)
    d["kind"], d["status"] = Kind(d["kind"]), Status(d["status"])
    for k in _JOB_TIMES:
        if d.get(k) is not None:
            d[k] = _time(d[k])
    d["headers"] = d.get("headers") or {}
    return Job(**d)


def _history_doc(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (iso(row[k]) if k in TIME_KEYS and row[k] is not None else row[k])
            for k in HISTORY_KEYS}


def _history_from(d: dict[str, Any]) -> dict[str, Any]:
    if set(d) != set(HISTORY_KEYS):
        raise ValueError(f"a history row needs exactly {', '.join(HISTORY_KEYS)}")
    return {k: (_time(d[k]) if k in TIME_KEYS and d[k] is not None else d[k])
            for k in HISTORY_KEYS}


def _time(text: str) -> datetime:
    t = from_iso(text)
    if t.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return t
