"""Moving a home between stores (SQLite <-> PostgreSQL): ``export`` writes JSON lines, the
recurring schedules first, then pending jobs, then history, then a last line with the counts;
``load`` checks those counts, that the target holds nothing yet, and that every row arrived.
The stores do the reading and writing (``Store.export_schedules``, ``export_pending``,
``export_history``, ``import_home``); this module turns records into lines and back, and
trusts no line: every job, pending or kept by a history row, goes through the checks of
``add`` (``jobspec.rebuild``: its id names a file; its target, payload and kind are what a
runner will act on), exec and python jobs only when the import allows them (``Trust``), every
history row's fields are checked (``Trust.history``), and every schedule as ``awty schedule
add`` checks it, its template as a job (``Trust.schedule``). Executions (the per-attempt log)
are not moved.

A job in flight at export is written as pending: stop the runners before moving a home, or its
callback may be sent once by the old home and once by the new one."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from . import jobspec
from .config import Settings
from .errors import InvalidInput, StoreError
from .model import ALL_KINDS, Job, Kind, Outcome, Schedule, Status
from .slots import from_iso, iso
from .slottree.tree import NoTree, SlotTree
from .storable import is_storable
from .store.base import Store
from .store.jobdict import job_from_json
from .store.portable import HISTORY_KEYS, OPTIONAL_KEYS, TIME_KEYS
from .store.rules import kept

FORMAT = "awty-export/1"
_JOB_FIELDS = Job._fields
_JOB_TIMES = ("first_check_at", "next_check_at", "created_at", "updated_at", "lease_until",
              "started_at", "occurrence")


# Why an import refuses an exec or python job unless told (``--allow-exec``): the file, not
# the person importing it, would choose what commands the runner hosts run.
EXEC_REFUSAL = ("{kind} jobs are imported only with --allow-exec (they run commands on the "
                "runner hosts; allowed now: {allowed})")
_NAMES = ("target", "entity_name", "entity_key", "idempotency_key", "fingerprint", "host",
          "schedule")  # a history row's names: refused unless storable as they are
_ANSWERS = ("error", "output")  # what runs wrote: escaped as runs' texts are (rules.kept)
_COUNTS = ("checks", "attempts")
_INTS = ("last_status", "pid")
_NUMBERS = ("duration_ms", "lateness_ms")


@dataclass(frozen=True)
class Trust:
    """What an import holds every record to: ``add``'s rules at ``now`` under ``settings``;
    exec and python jobs only with ``allow_exec``."""

    now: datetime
    settings: Settings
    allow_exec: bool = False

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted(ALL_KINDS)) if self.allow_exec else (Kind.HTTP.value,)

    def job(self, job: Job) -> tuple[Job, str | None]:
        return jobspec.rebuild(job, now=self.now, settings=self.settings, kinds=self.kinds,
                               kind_refusal=EXEC_REFUSAL)

    def schedule(self, s: Schedule) -> Schedule:
        """A schedule checked as ``schedule add`` checks one (``schedules.checked``), its
        template as ``job`` (so an exec template needs ``allow_exec``), at this home's
        resolution."""
        from .schedules import checked

        if not isinstance(s.template, Job):
            raise InvalidInput("template: must be a job document")
        try:
            template, _ = self.job(s.template)
        except InvalidInput as e:
            raise InvalidInput(f"template: {e}") from None
        return checked(s, now=self.now, resolution=self.settings.resolution,
                       template=template)

    def history(self, d: dict[str, Any]) -> dict[str, Any]:
        """A history record checked (``InvalidInput`` naming the field): its id and kind as
        ``add`` takes them, the job it keeps (what ``retry`` re-arms) as ``job`` does, its
        names storable as they are, what runs wrote escaped."""
        d = dict(d)
        d["id"] = jobspec.checked_id(d["id"])
        kind = jobspec.checked_kind(d["kind"], self.kinds, EXEC_REFUSAL)
        d["kind"] = kind.value
        try:
            d["outcome"] = Outcome(d["outcome"]).value
        except ValueError:
            raise InvalidInput(f"outcome: {d['outcome']!r} is not an outcome") from None
        for k in _NAMES:
            if d[k] is not None and (not isinstance(d[k], str) or not is_storable(d[k])
                                     or len(d[k]) > 8192):
                raise InvalidInput(f"{k}: must be text (UTF-8, no NUL)")
        if not isinstance(d["target"], str):
            raise InvalidInput("target: missing")
        if not isinstance(d["reason"], str):
            raise InvalidInput("reason: must be text")
        d["reason"] = kept(d["reason"]) or ""
        for k in _ANSWERS:
            if d[k] is not None and not isinstance(d[k], str):
                raise InvalidInput(f"{k}: must be text")
            d[k] = kept(d[k])
        for k in (*_COUNTS, *_INTS, *_NUMBERS):
            if not _fits(d[k], k):
                raise InvalidInput(f"{k}: {d[k]!r} is not "
                                   f"{'a number' if k in _NUMBERS else 'a whole number'}")
        for k in ("first_check_at", "ended_at"):
            if d[k] is None:
                raise InvalidInput(f"{k}: missing")
        if not isinstance(d["payload"], str):
            raise InvalidInput("payload: must be the payload's JSON text")
        jobspec.payload_text({"payload_json": d["payload"]}, self.settings)
        if d["job"] is not None:
            self._kept_job(d)
        return d

    def _kept_job(self, d: dict[str, Any]) -> None:
        if not isinstance(d["job"], str):
            raise InvalidInput("job: must be a job document")
        try:
            job = job_from_json(d["job"])
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            raise InvalidInput(f"job: not a job document ({e})") from None
        try:
            checked, _ = self.job(job)
        except InvalidInput as e:
            raise InvalidInput(f"job: {e}") from None
        if (checked.id, checked.kind.value) != (d["id"], d["kind"]):
            raise InvalidInput("job: its id or kind is not the row's")


def _fits(v: Any, k: str) -> bool:
    if v is None:
        return k not in _COUNTS
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v >= 0 or k not in _COUNTS  # an exit status may be negative (a signal)
    return k in _NUMBERS and isinstance(v, float) and math.isfinite(v)


@dataclass(frozen=True)
class Moved:
    jobs: int
    history: int
    schedules: int = 0  # an export made before schedules has none

    def to_dict(self) -> dict[str, int]:
        return {"jobs": self.jobs, "history": self.history, "schedules": self.schedules}


def export(store: Store, out: IO[str]) -> Moved:
    """Write the store's schedules, pending jobs and history to ``out``, each streamed:
    memory stays flat however many there are."""
    out.write(json.dumps({"format": FORMAT}) + "\n")
    jobs = history = schedules = 0
    for s in store.export_schedules():
        out.write(json.dumps({"schedule": _schedule_doc(s)}) + "\n")
        schedules += 1
    for job, fp in store.export_pending():
        out.write(json.dumps({"job": _job_doc(as_pending(job)), "fingerprint": fp}) + "\n")
        jobs += 1
    for row in store.export_history():
        out.write(json.dumps({"history": _history_doc(row)}) + "\n")
        history += 1
    end = {"jobs": jobs, "history": history}
    if schedules:  # an export without schedules reads as before
        end["schedules"] = schedules
    out.write(json.dumps({"end": end}) + "\n")
    return Moved(jobs, history, schedules)


def load(store: Store, tree: SlotTree | NoTree, where: str, lines: Iterable[str],
         trust: Trust) -> Moved:
    """Import an export into ``store``, which must be empty (``where`` names it in messages;
    ``tree`` gets the jobs' envelopes, where the home keeps files). Every record is held to
    ``trust`` as it is read: a refused one is ``InvalidInput`` naming its line and field, and
    nothing is written. Then all jobs and all history in one transaction, or nothing; the
    counts on the export's last line must match what was read, and the store's counts what
    was written."""
    jobs, fps, rows, schedules, end = _read(lines, trust)
    held = store.count()
    if held or any(True for _ in store.history(limit=1)) or store.schedules():
        raise InvalidInput(f"import needs an empty store: {where} already holds "
                           f"{held} pending job(s), history or schedules")
    added, n_history = store.import_home(jobs, fps, rows, schedules)
    made = [x.job for x in added if x.created]
    if len(made) != len(jobs):
        raise StoreError(f"import: {len(jobs)} job(s) read, {len(made)} added")
    got = Moved(store.count(), n_history, len(store.schedules()))
    if got != end:
        raise StoreError(f"import: the export lists {end.jobs} job(s), {end.history} "
                         f"history row(s) and {end.schedules} schedule(s); the store now "
                         f"holds {got.jobs}, {got.history} and {got.schedules}")
    tree.write_many(made)
    return got


def as_pending(job: Job) -> Job:
    return job.replace(status=Status.PENDING, lease_owner=None, lease_until=None,
                       started_at=None)


# --- lines <-> records -----------------------------------------------------------------------
def _read(lines: Iterable[str], trust: Trust) -> tuple[
        list[Job], list[str | None], list[dict[str, Any]], list[Schedule], Moved]:
    jobs: list[Job] = []
    fps: list[str | None] = []
    rows: list[dict[str, Any]] = []
    schedules: list[Schedule] = []
    end: Moved | None = None
    occurrences: dict[tuple[str, datetime], int] = {}  # one job per occurrence: its line
    for n, line in _numbered(lines):
        try:
            doc = json.loads(line)
            if n == 1:
                if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                    raise ValueError(f"not an awty export (first line: {line[:60]!r})")
                continue
            if end is not None:
                raise ValueError("lines after the end line")
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            if "job" in doc:
                job, fp = trust.job(_job_from(doc["job"]))
                if job.schedule is not None and job.occurrence is not None:
                    seen = occurrences.setdefault((job.schedule, job.occurrence), n)
                    if seen != n:
                        raise ValueError(f"the {iso(job.occurrence)} occurrence of schedule "
                                         f"{job.schedule} has a job already (line {seen})")
                jobs.append(job)
                fps.append(fp)
            elif "history" in doc:
                rows.append(trust.history(_history_from(doc["history"])))
            elif "schedule" in doc:
                schedules.append(trust.schedule(_schedule_from(doc["schedule"])))
            elif "end" in doc:
                end = Moved(int(doc["end"]["jobs"]), int(doc["end"]["history"]),
                            int(doc["end"].get("schedules", 0)))
            else:
                raise ValueError("neither a schedule, a job, a history row nor the end line")
        except KeyError as e:
            raise InvalidInput(f"line {n}: missing field {e}") from None
        except (ValueError, TypeError, AttributeError, RecursionError) as e:
            raise InvalidInput(f"line {n}: {e}") from None
    if end is None:
        raise InvalidInput("the export has no end line: it was cut short")
    if (len(jobs), len(rows), len(schedules)) != (end.jobs, end.history, end.schedules):
        raise InvalidInput(f"the export lists {end.jobs} job(s), {end.history} history "
                           f"row(s) and {end.schedules} schedule(s) but holds {len(jobs)}, "
                           f"{len(rows)} and {len(schedules)}")
    names = [s.name for s in schedules]
    if len(set(names)) != len(names):
        raise InvalidInput("schedule: a name appears twice")
    latest: dict[str, datetime] = {}
    for name, at in occurrences:
        if name not in latest or at > latest[name]:
            latest[name] = at
    # An export reads the schedules before the pending jobs: a runner's claim between the two
    # reads (a home moved while it ran) leaves a schedule at the occurrence it claimed while
    # its job of the next one is there too. The schedule moves on to its latest occurrence
    # among the jobs, else the new home would make that next one again.
    schedules = [s if latest.get(s.name, s.next_at) <= s.next_at
                 else s.replace(next_at=latest[s.name]) for s in schedules]
    return jobs, fps, rows, schedules, end


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
    """A job as the line gives it, unchecked (``Trust.job`` checks it): times read, the
    status, lease and fingerprint a move drops left out."""
    unknown = set(d) - set(_JOB_FIELDS)
    if unknown:
        raise ValueError(f"unknown job field(s) {sorted(unknown)}")
    d = {k: v for k, v in d.items()
         if k not in ("status", "lease_owner", "lease_until", "started_at")}
    for k in _JOB_TIMES:
        if d.get(k) is not None:
            d[k] = _time(d[k], k)
    d["headers"] = d.get("headers") or {}
    return Job(**d)


_SCHEDULE_TIMES = ("start", "next_at", "paused_at", "created_at")


def _schedule_doc(s: Schedule) -> dict[str, Any]:
    d = {k: getattr(s, k) for k in Schedule.__slots__}
    d["template"] = _job_doc(s.template)
    for k in _SCHEDULE_TIMES:
        d[k] = iso(d[k]) if d[k] is not None else None
    return d


def _schedule_from(d: dict[str, Any]) -> Schedule:
    """A schedule as the line gives it, unchecked (``Trust.schedule`` checks it)."""
    unknown = set(d) - set(Schedule.__slots__)
    if unknown:
        raise ValueError(f"unknown schedule field(s) {sorted(unknown)}")
    d = dict(d)
    for k in _SCHEDULE_TIMES:
        if d.get(k) is not None:
            d[k] = _time(d[k], k)
    if not isinstance(d.get("template"), dict):
        raise ValueError("template: must be a job object")
    d["template"] = _job_from(d["template"])
    fields: dict[str, Any] = {k: d.get(k) for k in Schedule.__slots__}
    return Schedule(**fields)


def _history_doc(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (iso(row[k]) if k in TIME_KEYS and row[k] is not None else row[k])
            for k in HISTORY_KEYS}


def _history_from(d: dict[str, Any]) -> dict[str, Any]:
    if not set(HISTORY_KEYS) - set(OPTIONAL_KEYS) <= set(d) <= set(HISTORY_KEYS):
        raise ValueError(f"a history row needs exactly {', '.join(HISTORY_KEYS)}")
    return {k: (_time(d[k], k) if k in TIME_KEYS and d.get(k) is not None else d.get(k))
            for k in HISTORY_KEYS}


def _time(text: Any, name: str) -> datetime:
    if not isinstance(text, str):
        raise ValueError(f"{name}: {text!r} is not a time")
    try:
        t = from_iso(text)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    if t.tzinfo is None:
        raise ValueError(f"{name}: {text!r} has no time zone")
    return t
