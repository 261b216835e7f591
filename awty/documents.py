"""What a job, an execution and a history row look like as JSON: one shape for ``--json``
(the CLI) and the HTTP API (``awty serve``), so the two never drift apart."""

from __future__ import annotations

import json
from json.encoder import encode_basestring

from .model import ApiToken, Execution, HistoryRow, Job
from .record import Record, _draft, _seal
from .slots import iso, slot_id

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

_SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "x-api-key", "api-key")


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """Credentials in custom headers are stored (they must be sent) but never shown."""
    return {k: ("***" if k.lower() in _SECRET_HEADERS or "token" in k.lower()
                or "secret" in k.lower() else v) for k, v in headers.items()}


def job_dict(job: Job) -> dict[str, Any]:
    return {
        "id": job.id, "kind": job.kind.value, "target": job.target,
        "entity": job.entity_name, "key": job.entity_key, "payload": job.payload,
        "headers": redact_headers(job.headers), "status": job.status.value,
        "slot": slot_id(job.next_check_at), "first_check_at": iso(job.first_check_at),
        "next_check_at": iso(job.next_check_at), "check_count": job.check_count,
        "attempt": job.attempt, "max_checks": job.max_checks, "horizon": job.horizon,
        "timeout": job.timeout, "max_attempts": job.max_attempts,
        "misfire_grace": job.misfire_grace, "idempotency_key": job.idempotency_key,
        "created_at": iso(job.created_at) if job.created_at else None,
        "updated_at": iso(job.updated_at) if job.updated_at else None,
        "lease_until": iso(job.lease_until) if job.lease_until else None,
        "last_error": job.last_error,
    }


# JSON as the HTTP API answers (Starlette's JSONResponse): compact, UTF-8 as is, no NaN
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _number(value: float) -> str:
    return int.__repr__(value) if type(value) is int else _COMPACT(value)


def _at(at: Any) -> str:
    return f'"{iso(at)}"' if at else "null"


def job_json(job: Job, before: str = "", after: str = "") -> str:
    """``job_dict(job)`` as compact JSON text (``_COMPACT``'s bytes for it) in ~1/4 of the
    time (serve's batch answer holds thousands): built from the job's fields, its payload the
    JSON text the job holds (stored compact by ``payload_text``), not parsed and dumped again.
    ``before``/``after``: members put first and last (``"state":"pending",``). What costs
    most here is a call a field: the fields most often empty are tested inline, the id (26
    Crockford base32 characters, ``checked_id``) needs no escaping, and an enum is formatted
    as the str it is (``.value`` is a Python-level property)."""
    j, q = job, encode_basestring
    return (
        f'{{{before}"id":"{j.id}","kind":"{j.kind}","target":{q(j.target)},'
        f'"entity":{"null" if j.entity_name is None else q(j.entity_name)},'
        f'"key":{"null" if j.entity_key is None else q(j.entity_key)},'
        f'"payload":{j.payload_json},'
        f'"headers":{_COMPACT(redact_headers(j.headers)) if j.headers else "{}"},'
        f'"status":"{j.status}","slot":"{slot_id(j.next_check_at)}",'
        f'"first_check_at":"{iso(j.first_check_at)}","next_check_at":"{iso(j.next_check_at)}",'
        f'"check_count":{_number(j.check_count)},"attempt":{_number(j.attempt)},'
        f'"max_checks":{"null" if j.max_checks is None else _number(j.max_checks)},'
        f'"horizon":{"null" if j.horizon is None else _number(j.horizon)},'
        f'"timeout":{"null" if j.timeout is None else _number(j.timeout)},'
        f'"max_attempts":{"null" if j.max_attempts is None else _number(j.max_attempts)},'
        f'"misfire_grace":{"null" if j.misfire_grace is None else _number(j.misfire_grace)},'
        f'"idempotency_key":'
        f'{"null" if j.idempotency_key is None else q(j.idempotency_key)},'
        f'"created_at":{_at(j.created_at)},"updated_at":{_at(j.updated_at)},'
        f'"lease_until":{"null" if j.lease_until is None else _at(j.lease_until)},'
        f'"last_error":{"null" if j.last_error is None else q(j.last_error)}{after}}}')


def execution_dict(e: Execution) -> dict[str, Any]:
    return {"at": iso(e.at), "slot": e.slot, "check_no": e.check, "attempt": e.attempt,
            "answer": e.answer.value, "status": e.status, "duration_ms": e.duration_ms,
            "lateness_ms": e.lateness_ms, "error": e.error, "host": e.host, "pid": e.pid}


def history_dict(h: HistoryRow) -> dict[str, Any]:
    return {
        "id": h.id, "kind": h.kind.value, "target": h.target, "entity": h.entity_name,
        "key": h.entity_key, "outcome": h.outcome.value, "reason": h.reason,
        "checks": h.checks, "attempts": h.attempts, "first_check_at": iso(h.first_check_at),
        "ended_at": iso(h.ended_at), "created_at": iso(h.created_at) if h.created_at else None,
        "duration_ms": h.duration_ms, "last_status": h.last_status, "error": h.error,
        "output": h.output,
        "payload": json.loads(h.payload_json) if h.payload_json is not None else None,
        "host": h.host, "pid": h.pid,  # the runner that ended it (none for a cancel)
    }


class JobView(Record):
    """One job as ``Awty.get`` finds it, whatever became of it: ``state`` is "pending",
    "in_flight" (being delivered now) or "ended"; ``job`` the pending ``Job`` (None once
    ended); ``ended`` its history rows, oldest first (empty while pending; more than one when
    ``retry`` re-armed it). ``as_dict()`` is ``awty show --json``'s document without the
    executions: JSON as it stands, credentials in headers redacted."""

    __slots__ = ("id", "state", "job", "ended")
    id: str
    state: str
    job: Job | None
    ended: list[HistoryRow]

    def __new__(cls, id: str, state: str, job: Job | None,
                ended: list[HistoryRow]) -> JobView:
        s = _draft(cls)
        s.id = id
        s.state = state
        s.job = job
        s.ended = ended
        return _seal(s, cls)

    @classmethod
    def of(cls, job: Job | None, ended: list[HistoryRow]) -> JobView:
        if job is not None:
            return cls(job.id, job.status.value, job, [])
        return cls(ended[-1].id, "ended", None, ended)

    def as_dict(self) -> dict[str, Any]:
        if self.job is not None:
            return {"state": self.state, **job_dict(self.job)}
        return {"state": "ended", **history_dict(self.ended[-1]),
                "ended_runs": [history_dict(h) for h in self.ended]}


def show_document(view: JobView, executions: list[Execution]) -> dict[str, Any]:
    """``awty show --json``'s document: a pending job (``state`` its status) or how it ended
    (``state`` "ended", its last history row, every ended run), with each execution."""
    return {**view.as_dict(), "executions": [execution_dict(e) for e in executions]}


def schedule_dict(info: Any) -> dict[str, Any]:
    """``awty schedule list --json``'s row for a ``schedules.ScheduleInfo`` (the API's and the
    console's too)."""
    s = info.schedule
    return {"name": s.name, "rule": info.rule, "cron": s.cron, "every": s.every,
            "zone": s.zone, "missed": s.missed, "next": iso(s.next_at),
            "paused": s.paused_at is not None, "last_outcome": info.last_outcome,
            "last_at": iso(info.last_at) if info.last_at else None, "pending": info.pending,
            "kind": s.template.kind.value, "target": s.template.target}


def schedule_document(info: Any, upcoming: list[Any]) -> dict[str, Any]:
    """``awty schedule show --json``'s document: the list row and the next occurrences."""
    return {**schedule_dict(info), "next_occurrences": [iso(t) for t in upcoming]}


def token_dict(token: ApiToken) -> dict[str, Any]:
    """A token as ``token list --json`` shows it: never the token (only its hash is kept), and
    of its exec environment the names only, every value ``***``: the owner gave them to hand
    to the jobs (a database URL, an API key), not to show to whoever can read the store."""
    return {"name": token.name, "scopes": list(token.scopes),
            "created_at": token.created_at.isoformat(),
            "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
            **token.options(), "exec_env": dict.fromkeys(token.exec_env, "***")}
