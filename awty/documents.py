"""What a job, an execution and a history row look like as JSON: one shape for ``--json``
(the CLI) and the HTTP API (``awty serve``), so the two never drift apart."""

from __future__ import annotations

import json

from .model import Execution, HistoryRow, Job
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


def show_document(found: Job | list[HistoryRow], executions: list[Execution]) -> dict[str, Any]:
    """``awty show --json``'s document: a pending job (``state`` its status) or how it ended
    (``state`` "ended", its last history row, every ended run), with each execution."""
    events = [execution_dict(e) for e in executions]
    if isinstance(found, list):
        return {"state": "ended", **history_dict(found[-1]),
                "ended_runs": [history_dict(h) for h in found], "executions": events}
    return {"state": found.status.value, **job_dict(found), "executions": events}
