"""A job as the JSON a history row keeps (what ``retry`` and idempotency need to rebuild it).
One definition for every store: SQLite and PostgreSQL write and read the same document."""

from __future__ import annotations

import json
from datetime import datetime

from ..model import Job, Kind
from ..slots import from_iso, iso

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

_COMPACT = json.JSONEncoder(separators=(",", ":")).encode


def _opt_iso(at: datetime | None) -> str | None:
    return iso(at) if at else None


def _opt_time(text: str | None) -> datetime | None:
    return from_iso(text) if text else None


def job_to_dict(j: Job) -> dict[str, Any]:
    """The job as plain JSON-able data."""
    d: dict[str, Any] = {
        "id": j.id, "kind": j.kind.value, "target": j.target, "payload": j.payload_json,
        "headers": j.headers or None, "entity": j.entity_name, "key": j.entity_key,
        "first_check_at": iso(j.first_check_at), "max_checks": j.max_checks,
        "horizon": j.horizon, "timeout": j.timeout, "max_attempts": j.max_attempts,
        "misfire_grace": j.misfire_grace, "idempotency_key": j.idempotency_key, "cwd": j.cwd,
        "created_at": _opt_iso(j.created_at),
    }
    if j.env is not None:
        d["env"] = j.env
    if j.schedule is not None:
        d["schedule"] = j.schedule
        d["occurrence"] = _opt_iso(j.occurrence)
    return d


def job_to_json(j: Job) -> str:
    return _COMPACT(job_to_dict(j))


_PAYLOAD_ONLY = '{"payload":'


def payload_only_json(j: Job) -> str:
    """What a plain ended job keeps: its payload alone (encoding every row costs ~10 % of a
    slot run). ``payload_json`` is stored JSON text, embedded as it is."""
    return payload_only(j.payload_json)


def payload_only(payload_json: str) -> str:
    return _PAYLOAD_ONLY + payload_json + "}"


def whole_job(text: str) -> str | None:
    """The job document a history row's text is, or None when it keeps the payload alone."""
    return None if text.startswith(_PAYLOAD_ONLY) else text


def job_from_json(text: str) -> Job:
    """The job back from ``job_to_json``: pending again at its first check."""
    d = json.loads(text)
    first = from_iso(d["first_check_at"])
    return Job(
        id=d["id"], kind=Kind(d["kind"]), target=d["target"], payload_json=d["payload"],
        headers=d.get("headers") or {}, entity_name=d.get("entity"), entity_key=d.get("key"),
        first_check_at=first, next_check_at=first, max_checks=d.get("max_checks"),
        horizon=d.get("horizon"), timeout=d.get("timeout"), max_attempts=d.get("max_attempts"),
        misfire_grace=d.get("misfire_grace"), idempotency_key=d.get("idempotency_key"),
        cwd=d.get("cwd"), created_at=_opt_time(d.get("created_at")), env=d.get("env"),
        schedule=d.get("schedule"), occurrence=_opt_time(d.get("occurrence")),
    )


def payload_of(text: str | None) -> str | None:
    """The stored payload JSON text of a history row's job document (never parsed further)."""
    if not text:
        return None
    if text.startswith(_PAYLOAD_ONLY) and text.endswith("}"):
        # ``payload_only_json``: the payload is embedded as it was stored; cut it out as is
        return text[len(_PAYLOAD_ONLY):-1]
    payload: str | None = json.loads(text).get("payload")  # the payload's JSON text
    return payload
