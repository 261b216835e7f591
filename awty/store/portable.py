"""What ``export_history`` gives and ``import_home`` takes, the same for every store: one
dict per history row with the keys of ``HISTORY_KEYS``. Times are aware UTC datetimes;
``payload`` is the job's payload JSON text; ``job`` the whole job document (``jobdict``) when
the row keeps one (what ``retry`` and idempotency rebuild the job from), else None."""

from __future__ import annotations

HISTORY_KEYS = (
    "id", "kind", "target", "entity_name", "entity_key", "outcome", "reason", "checks",
    "attempts", "first_check_at", "ended_at", "created_at", "duration_ms", "lateness_ms",
    "last_status", "error", "output", "idempotency_key", "fingerprint", "payload", "job",
    "host", "pid", "schedule",
)
# Keys an export made before they existed may lack (read as None).
OPTIONAL_KEYS = ("host", "pid", "schedule")
TIME_KEYS = ("first_check_at", "ended_at", "created_at")
