"""The OpenAPI 3.1 document of ``/v1`` (``GET /v1/openapi.json``). The tests hold every response
they see to it (tests/serve: a small validator over jsonschema)."""

from __future__ import annotations

from typing import Any

from .._version import __version__

_S = {"type": "string"}
_SN = {"type": ["string", "null"]}
_I = {"type": "integer"}
_IN = {"type": ["integer", "null"]}
_NN = {"type": ["number", "null"]}
_ANY: dict[str, Any] = {}


def _obj(props: dict[str, Any], required: list[str] | None = None,
         more: bool = False) -> dict[str, Any]:
    return {"type": "object", "properties": props,
            "required": list(props) if required is None else required,
            "additionalProperties": more}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


JOB = _obj({
    "id": _S, "kind": {"enum": ["http", "exec", "python"]}, "target": _S, "entity": _SN,
    "key": _SN, "payload": _ANY, "headers": {"type": "object",
                                             "additionalProperties": _S},
    "status": {"enum": ["pending", "in_flight"]}, "slot": _S, "first_check_at": _S,
    "next_check_at": _S, "check_count": _I, "attempt": _I, "max_checks": _IN,
    "horizon": _NN, "timeout": _NN, "max_attempts": _IN, "misfire_grace": _NN,
    "idempotency_key": _SN, "created_at": _SN, "updated_at": _SN, "lease_until": _SN,
    "last_error": _SN})
EXECUTION = _obj({"at": _S, "slot": _S, "check_no": _I, "attempt": _I, "answer": _S,
                  "status": _IN, "duration_ms": _NN, "lateness_ms": _NN, "error": _SN,
                  "host": _SN, "pid": _IN})
HISTORY = _obj({
    "id": _S, "kind": _S, "target": _S, "entity": _SN, "key": _SN,
    "outcome": {"enum": ["done", "gone", "cancelled", "failed", "expired"]}, "reason": _S,
    "checks": _I, "attempts": _I, "first_check_at": _S, "ended_at": _S, "created_at": _SN,
    "duration_ms": _NN, "last_status": _IN, "error": _SN, "output": _SN, "payload": _ANY,
    "host": _SN, "pid": _IN})
# `awty show --json`: a pending job (its fields, state, executions) or how it ended
SHOWN = {"oneOf": [
    _obj({**JOB["properties"], "state": {"enum": ["pending", "in_flight"]},
          "executions": {"type": "array", "items": _ref("Execution")}}),
    _obj({**HISTORY["properties"], "state": {"const": "ended"},
          "ended_runs": {"type": "array", "items": _ref("History")},
          "executions": {"type": "array", "items": _ref("Execution")}}),
]}
PROBLEM = _obj({"type": _S, "title": _S, "status": _I, "detail": _S, "field": _S,
                "index": _I, "runner": _SN}, ["type", "title", "status", "detail"])
NEW_JOB: dict[str, Any] = {
           "type": "object", "description": "The fields of an `awty add --batch` line.",
           "properties": {"target": _S, "at": {"type": ["string", "number"]},
                          "in": {"type": ["string", "number"]},
                          "kind": {"enum": ["http", "exec", "python"]}, "payload": _ANY,
                          "payload_json": _S, "headers": _ANY, "entity": _S, "key": _S,
                          "idempotency_key": _S, "max_checks": _I, "horizon": _ANY,
                          "timeout": _ANY, "max_attempts": _I, "misfire_grace": _ANY},
           "required": ["target"]}
SCHEDULE = _obj({
    "name": _S, "rule": _S, "cron": _SN, "every": _IN, "zone": _S,
    "missed": {"enum": ["skip", "once", "all"]}, "next": _S, "paused": {"type": "boolean"},
    "last_outcome": _SN, "last_at": _SN, "pending": _I,
    "kind": {"enum": ["http", "exec", "python"]}, "target": _S})
SHOWN_SCHEDULE = _obj({**SCHEDULE["properties"],
                       "next_occurrences": {"type": "array", "items": _S}})
_DURATION = {"type": ["string", "number"]}
NEW_SCHEDULE = {
    "type": "object",
    "description": "The options of `awty schedule add` (cron or every), and the job fields of "
                   "an `add --batch` line but at, in, idempotency_key and cwd.",
    "properties": {"name": _S, "target": _S, "cron": _S, "every": _DURATION, "start": _S,
                   "tz": _S, "missed": {"enum": ["skip", "once", "all"]},
                   "missed_window": _DURATION, **{
                       k: v for k, v in NEW_JOB["properties"].items()
                       if k not in ("at", "in", "idempotency_key")}},
    "required": ["name", "target"]}
SUMMARY = {"type": "object", "properties": {"slot": _S, "ran": _I,
                                            "outcomes": {"type": "object"}},
           "required": ["slot", "ran"]}


_RETRY_AFTER = {"Retry-After": {"description": "Seconds until the token has room again",
                                 "required": True, "schema": _I}}


def _problems(*codes: int) -> dict[str, Any]:
    return {str(c): {"description": "The token's rate limit (`awty token new --rate`, per "
                                    "serve process) is hit" if c == 429 else
                     "A problem (RFC 9457)",
                     "content": {"application/problem+json": {"schema": _ref("Problem")}},
                     **({"headers": _RETRY_AFTER} if c == 429 else {})} for c in codes}


def _ok(schema: dict[str, Any], code: str = "200", **more: Any) -> dict[str, Any]:
    return {code: {"description": "OK", "content": {"application/json": {"schema": schema}},
                   **more}}


_ID = [{"name": "id", "in": "path", "required": True, "schema": _S,
        "description": "A job id, any case, or a unique prefix of 6 characters or more"}]
_Q = [{"name": n, "in": "query", "required": False, "schema": _S} for n in (
    "status", "slot", "entity", "key", "kind", "after", "limit")]
_HQ = [{"name": n, "in": "query", "required": False, "schema": _S} for n in (
    "outcome", "entity", "key", "since", "limit")]
_AUTH = (401, 403, 429, 503)
_NAME = [{"name": "name", "in": "path", "required": True, "schema": _S,
          "description": "A schedule's name"}]


def document() -> dict[str, Any]:
    jobs_page = _obj({"jobs": {"type": "array", "items": _ref("Job")}, "next": _SN})
    batch = _obj({"created": _I, "jobs": {"type": "array", "items": _obj(
        {**JOB["properties"], "created": {"type": "boolean"}})}})
    schedules_page = _obj({"schedules": {"type": "array", "items": _ref("Schedule")},
                           "next": _SN})

    def on_schedule(summary: str, ok: dict[str, Any], *codes: int) -> dict[str, Any]:
        return {"post": {"summary": summary, "parameters": _NAME,
                         "responses": {**_ok(ok), **_problems(400, 404, *codes, *_AUTH)}}}

    return {
        "openapi": "3.1.0",
        "info": {"title": "awty", "version": __version__,
                 "description": "Schedule HTTP callbacks and jobs into slots: `awty serve`."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Job": JOB, "Execution": EXECUTION, "History": HISTORY,
                        "ShownJob": SHOWN, "Problem": PROBLEM, "NewJob": NEW_JOB,
                        "RunSummary": SUMMARY, "Schedule": SCHEDULE,
                        "ShownSchedule": SHOWN_SCHEDULE, "NewSchedule": NEW_SCHEDULE},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/jobs": {
                "post": {"summary": "Add a job", "parameters": [
                    {"name": "Idempotency-Key", "in": "header", "required": False,
                     "schema": _S}],
                         "requestBody": {"required": True, "content": {"application/json": {
                             "schema": _ref("NewJob")}}},
                         "responses": {**_ok(_ref("ShownJob"), "201"), **_ok(_ref("ShownJob")),
                                       **_problems(400, 409, 413, *_AUTH)}},
                "get": {"summary": "List pending jobs", "parameters": _Q,
                        "responses": {**_ok(jobs_page), **_problems(400, *_AUTH)}},
            },
            "/v1/jobs/batch": {"post": {
                "summary": "Add jobs, all or nothing",
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"type": "array",
                                                    "items": _ref("NewJob")}},
                    "application/x-ndjson": {"schema": _S}}},
                "responses": {**_ok(batch, "201"), **_ok(batch),
                              **_problems(400, 409, 413, *_AUTH)}}},
            "/v1/jobs/{id}": {
                "get": {"summary": "A job and its executions", "parameters": _ID,
                        "responses": {**_ok(_ref("ShownJob")), **_problems(400, 404, *_AUTH)}},
                "delete": {"summary": "Cancel a job", "parameters": _ID,
                           "responses": {**_ok(_obj({"cancelled": _S})),
                                         **_problems(400, 404, 409, *_AUTH)}},
            },
            "/v1/jobs/{id}/run": {"post": {
                "summary": "Fire a pending job now", "parameters": _ID,
                "responses": {**_ok(_ref("RunSummary")), **_problems(400, 404, 409, *_AUTH)}}},
            "/v1/jobs/{id}/reschedule": {"post": {
                "summary": "Move a pending job", "parameters": _ID,
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": _obj({"at": {"type": ["string", "number"]},
                                    "in": {"type": ["string", "number"]}}, [])}}},
                "responses": {**_ok(_ref("Job")), **_problems(400, 404, 409, *_AUTH)}}},
            "/v1/jobs/{id}/retry": {"post": {
                "summary": "Re-arm an ended job", "parameters": _ID,
                "responses": {**_ok(_ref("Job")), **_problems(400, 404, 409, *_AUTH)}}},
            "/v1/schedules": {
                "post": {"summary": "Add a recurring schedule",
                         "requestBody": {"required": True, "content": {"application/json": {
                             "schema": _ref("NewSchedule")}}},
                         "responses": {**_ok(_ref("ShownSchedule"), "201"),
                                       **_problems(400, 409, 413, *_AUTH)}},
                "get": {"summary": "List schedules, by name", "parameters": [
                    {"name": n, "in": "query", "required": False, "schema": _S}
                    for n in ("after", "limit")],
                        "responses": {**_ok(schedules_page), **_problems(400, *_AUTH)}},
            },
            "/v1/schedules/{name}": {
                "get": {"summary": "A schedule and its next occurrences", "parameters": [
                    *_NAME, {"name": "n", "in": "query", "required": False, "schema": _S,
                             "description": "How many occurrences (default 3)"}],
                        "responses": {**_ok(_ref("ShownSchedule")),
                                      **_problems(400, 404, *_AUTH)}},
                "delete": {"summary": "Remove a schedule; its pending occurrences are "
                                      "cancelled", "parameters": _NAME,
                           "responses": {**_ok(_obj({"removed": _S, "cancelled": {
                               "type": "array", "items": _S}})),
                                         **_problems(400, 404, 409, *_AUTH)}},
            },
            "/v1/schedules/{name}/pause": on_schedule(
                "Pause: the pending occurrence is cancelled until resume",
                _ref("ShownSchedule"), 409),
            "/v1/schedules/{name}/resume": on_schedule(
                "Resume: occurrences missed meanwhile follow the missed policy",
                _ref("ShownSchedule"), 409),
            "/v1/schedules/{name}/run": on_schedule(
                "Fire the target now (none of the occurrences)", _ref("RunSummary"), 409),
            "/v1/history": {"get": {
                "summary": "Ended jobs, newest first", "parameters": _HQ,
                "responses": {**_ok(_obj({"history": {"type": "array",
                                                      "items": _ref("History")}})),
                              **_problems(400, *_AUTH)}}},
            "/v1/slots": {"get": {
                "summary": "Slots holding work", "responses": {
                    **_ok(_obj({"slots": {"type": "array", "items": _obj(
                        {"slot": _S, "at": _S, "jobs": _I})}})), **_problems(*_AUTH)}}},
            "/v1/stats": {"get": {
                "summary": "What `awty stats --json` shows",
                "parameters": [{"name": "window", "in": "query", "required": False,
                                "schema": _S}],
                "responses": {**_ok({"type": "object", "required": [
                    "pending", "outcomes", "executions"]}), **_problems(400, *_AUTH)}}},
            "/healthz": {"get": {"security": [], "summary": "The store answers",
                                 "responses": {**_ok({"type": "object"}),
                                               "503": {"description": "store down"}}}},
            "/readyz": {"get": {"security": [], "summary": "And the last slot fired",
                                "responses": {**_ok({"type": "object"}),
                                              "503": {"description": "not ready"}}}},
            "/metrics": {"get": {"security": [], "summary": "Prometheus exposition (counts, "
                                 "never a job's target or payload)",
                                 "responses": {"200": {"description": "OK", "content": {
                                     "text/plain": {"schema": _S}}}}}},
        },
    }
