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
    "id": _S, "kind": {"enum": ["http", "exec", "python"]}, "target": _S, "entity": _SN,
    "key": _SN, "outcome": {"enum": ["done", "gone", "cancelled", "failed", "expired"]},
    "reason": _S,
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
# What the server reads, as patterns: where its grammar is small (ids, names, slots, limits,
# header names) exactly; where it is open (durations, times, cron) the common forms, each
# description naming what else is read. A request the document allows gets past the parsing
# (tests/serve/test_fuzz_api.py draws its valid requests from here).
_ID_CHARS = "0-9A-HJKMNP-TV-Za-hjkmnp-tv-z"  # Crockford base32, any case (ids.ID_CHARS)
JOB_ID = {"type": "string", "pattern": f"^[{_ID_CHARS}]{{6,26}}$",
          "description": "A job id (26 characters), any case, or a unique prefix of 6 or more"}
NAME = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}
TEXT = {"type": "string", "minLength": 1, "maxLength": 1024,  # jobspec._MAX_TEXT
        "pattern": "^[^\\x00]+$"}
SLOT_ID = {"type": "string", "description": "YYYYMMDDHHMM in UTC",
           "pattern": "^[1-9][0-9]{3}(0[1-9]|1[0-2])(0[1-9]|1[0-9]|2[0-8])([01][0-9]|2[0-3])"
                      "[0-5][0-9]$"}
_UNITS = "(s|m|h|d)"
DURATION_TEXT = {"type": "string", "pattern": f"^[1-9][0-9]{{0,2}}{_UNITS}$"}
DURATION = {"description": "A duration: 90s, 15m, 2h, 1d or seconds (also read: 1h30m, "
                           "2 hours, PT2H, 1w), more than 0 and at most 10 years",
            "anyOf": [DURATION_TEXT,
                      {"type": "number", "exclusiveMinimum": 0, "maximum": 315360000}]}
IN = {"description": "How long from now: 0s to max_delay (default 365 days); the forms of a "
                     "duration",
      "anyOf": [{"type": "string",
                 "pattern": "^([0-9]{1,3}(s|m|h)|([0-9]{1,2}|[12][0-9]{2}|3[0-5][0-9]|36[0-4])d)$"},
                {"type": "number", "minimum": 0, "maximum": 31536000}]}
_WALL = "([01]?[0-9]|2[0-3]):[0-5][0-9]"
_DAY = "(mon|tues|wednes|thurs|fri|satur|sun)day"
AT = {"description": "When: an ISO 8601 time (with a zone, else the server's local time), "
                     "epoch seconds, now, or the next noon, midnight, HH:MM, weekday or "
                     "tomorrow (also read: the CLI's other phrases, e.g. 'in 2 hours'); not in "
                     "the past, at most max_delay ahead",
      "anyOf": [{"type": "string", "format": "date-time"},
                {"type": "string", "pattern": f"^(now|noon|midnight|tomorrow|{_DAY}|"
                                              f"((tomorrow|{_DAY}) )?{_WALL})$"},
                {"type": "number", "minimum": 100000000, "maximum": 99999999999}]}
SINCE = {"description": "A duration ago (1d, 2h) or a time read backwards (yesterday, monday, "
                        "an ISO 8601 date or time)",
         "anyOf": [{"type": "string", "pattern": f"^[1-9][0-9]{{0,2}}{_UNITS}$"},
                   {"type": "string", "pattern": f"^(yesterday|today|{_DAY})$"},
                   {"type": "string", "format": "date-time"}]}
KIND = {"enum": ["http", "exec", "python"]}
OUTCOME = {"enum": ["done", "gone", "cancelled", "failed", "expired"]}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000}
_HEADERS = {"type": "object", "maxProperties": 32,  # wire.MAX_HEADERS
            "description": "Sent with the callback (http jobs only); not Host, Content-*, "
                           "User-Agent, hop-by-hop, X-Awty-* nor webhook-* names",
            "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$"},
            "additionalProperties": {"type": "string", "maxLength": 4096,
                                     "pattern": "^[^\\x00-\\x08\\x0a-\\x1f\\x7f]*$"}}
_PY_TARGET = "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
URL = {"type": "string", "maxLength": 8192,
       "description": "An http(s) URL (no credentials in it; never a cloud metadata address)",
       "pattern": "^https?://[a-z]([a-z0-9-]{0,29}[a-z0-9])?(\\.[a-z]([a-z0-9-]{0,29}[a-z0-9])?)"
                  "{0,3}"
                  "(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?$"}
_STRING = '"[^"\\\\\\x00-\\x1f]{0,64}"'
_SCALAR = (f"(null|true|false|-?(0|[1-9][0-9]{{0,14}})(\\.[0-9]{{1,6}})?([eE][+-]?[0-9]{{1,2}})?"
           f"|{_STRING})")
_MEMBER = f"{_STRING}:{_SCALAR}"
# The fields of a job but its time and target (a job's and a schedule's)
JOB_FIELDS: dict[str, Any] = {
    "payload": _ANY,
    "payload_json": {"type": "string", "contentMediaType": "application/json",
                     "description": "The payload as JSON text, kept as given (the pattern "
                                    "gives a value, a flat array or object; any JSON is read)",
                     "pattern": f"^({_SCALAR}|\\[({_SCALAR}(,{_SCALAR})*)?\\]|"
                                f"\\{{({_MEMBER}(,{_MEMBER})*)?\\}})$"},
    "entity": TEXT, "key": TEXT, "max_checks": {"type": "integer", "minimum": 0,
                                                "maximum": 1000000},
    "horizon": DURATION, "timeout": DURATION, "misfire_grace": DURATION,
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 1000000}}


def _kinds(more: dict[str, Any], required: list[str],
           one_of: list[dict[str, Any]]) -> dict[str, Any]:
    """A job's fields and ``more``, only those (an unknown one is a 400), a key only with its
    entity, one of ``one_of`` (its time or rule), and the target of its kind (http the
    default; headers only for http). The fields are declared once, the kinds differ in their
    target only: a fuzzer's coverage walks each field once, not once a kind."""
    command = {"type": "string", "minLength": 1, "maxLength": 8192, "pattern": "\\S"}
    python = {"type": "string", "maxLength": 8192, "pattern": _PY_TARGET}
    not_http = {"required": ["kind"], "not": {"required": ["headers"]}}
    return {"type": "object", "additionalProperties": False, "required": required,
            "properties": {"target": {"type": "string", "minLength": 1, "maxLength": 8192},
                           "kind": KIND, "headers": _HEADERS, **JOB_FIELDS, **more},
            "dependentRequired": {"key": ["entity"]},
            "allOf": [{"oneOf": one_of}, {"oneOf": [
                {"properties": {"kind": {"const": "http"}, "target": URL}},
                {"properties": {"kind": {"const": "exec"}, "target": command}, **not_http},
                {"properties": {"kind": {"const": "python"}, "target": python}, **not_http}]}]}


NEW_JOB: dict[str, Any] = {
    "description": "The fields of an `awty add --batch` line: a target and one of at or in",
    **_kinds({"at": AT, "in": IN, "idempotency_key": TEXT}, ["target"],
             [{"required": ["at"]}, {"required": ["in"]}])}
# POST /v1/jobs: the key is the Idempotency-Key header's (a body's idempotency_key is read
# too, and must then be the header's)
ONE_JOB: dict[str, Any] = {
    "description": "The fields of an `awty add --batch` line: a target and one of at or in; "
                   "the idempotency key is the Idempotency-Key header",
    **_kinds({"at": AT, "in": IN}, ["target"], [{"required": ["at"]}, {"required": ["in"]}])}
SCHEDULE = _obj({
    "name": _S, "rule": _S, "cron": _SN, "every": _IN, "zone": _S,
    "missed": {"enum": ["skip", "once", "all"]}, "next": _S, "paused": {"type": "boolean"},
    "last_outcome": _SN, "last_at": _SN, "pending": _I,
    "kind": {"enum": ["http", "exec", "python"]}, "target": _S})
SHOWN_SCHEDULE = _obj({**SCHEDULE["properties"],
                       "next_occurrences": {"type": "array", "items": _S}})
CRON = {"type": "string",
        "description": "Five cron fields 'M H DoM Mon DoW' or an @ shorthand, no finer than the "
                       "home's slots (also read: lists, ranges, steps and names in any field)",
        "pattern": "^(@(hourly|daily|weekly|monthly|yearly)|[0-5]?[0-9] ([01]?[0-9]|2[0-3]|\\*)"
                   " ([1-9]|1[0-9]|2[0-8]|\\*) ([1-9]|1[0-2]|\\*) ([0-6]|mon-fri|\\*))$"}
EVERY = {"description": "The interval: 1h to 99d (also read: a duration of at least one slot)",
         "anyOf": [{"type": "string", "pattern": "^[1-9][0-9]?(h|d)$"},
                   {"type": "integer", "minimum": 3600, "maximum": 8553600}]}
ZONE = {"type": "string", "maxLength": 64,
        "pattern": "^(UTC|[A-Z][A-Za-z_]+(/[A-Z][A-Za-z_+-]+){1,2})$",
        "description": "An IANA time zone (Europe/Berlin, America/New_York) or UTC"}
NEW_SCHEDULE = {
    "description": "The options of `awty schedule add` (cron or every), and the job fields of "
                   "an `add --batch` line but at, in, idempotency_key and cwd.",
    **_kinds({"name": NAME, "cron": CRON, "every": EVERY,
              "start": {"description": "With every: the first occurrence (a time in the past "
                                       "sets the phase only)", "anyOf": AT["anyOf"][:2]},
              "tz": ZONE,
              "missed": {"enum": ["skip", "once", "all"]}, "missed_window": DURATION},
             ["name", "target"], [{"required": ["cron"], "not": {"anyOf": [
                 {"required": ["every"]}, {"required": ["start"]}]}},
                 {"required": ["every"], "not": {"required": ["cron"]}}])}
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


def _query(**schemas: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": n, "in": "query", "required": False, "schema": v}
            for n, v in schemas.items()]


_ID = [{"name": "id", "in": "path", "required": True, "schema": JOB_ID,
        "description": JOB_ID["description"]}]
CURSOR = {"type": "string", "description": "The `next` link's cursor (SLOT.ID) or a pending "
                                           "job's id",
          "pattern": f"^({SLOT_ID['pattern'][1:-1]}\\.[{_ID_CHARS}]{{26}}|"
                     f"[{_ID_CHARS}]{{6,26}})$"}
_Q = _query(status={"enum": ["pending", "in_flight"]}, slot=SLOT_ID, entity=TEXT, key=TEXT,
            kind=KIND, after=CURSOR, limit=LIMIT)
_HQ = _query(outcome=OUTCOME, entity=TEXT, key=TEXT, since=SINCE, limit=LIMIT)
_AUTH = (401, 403, 429, 503)
_NAME = [{"name": "name", "in": "path", "required": True, "schema": NAME,
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
                        "OneJob": ONE_JOB,
                        "RunSummary": SUMMARY, "Schedule": SCHEDULE,
                        "ShownSchedule": SHOWN_SCHEDULE, "NewSchedule": NEW_SCHEDULE},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/jobs": {
                "post": {"summary": "Add a job", "parameters": [
                    {"name": "Idempotency-Key", "in": "header", "required": False,
                     "schema": {**TEXT, "pattern": "^[!-~]([ -~]*[!-~])?$"},
                     "description": "The job's idempotency_key (a header's text: printable "
                                    "ASCII, no blank at either end)"}],
                         "requestBody": {"required": True, "content": {"application/json": {
                             "schema": _ref("OneJob")}}},
                         "responses": {**_ok(_ref("ShownJob"), "201"), **_ok(_ref("ShownJob")),
                                       **_problems(400, 409, 413, *_AUTH)}},
                "get": {"summary": "List pending jobs", "parameters": _Q,
                        "responses": {**_ok(jobs_page), **_problems(400, *_AUTH)}},
            },
            "/v1/jobs/batch": {"post": {
                "summary": "Add jobs, all or nothing",
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"type": "array", "minItems": 1,
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
                    "schema": {"oneOf": [_obj({"at": AT}), _obj({"in": IN})]}}}},
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
                "get": {"summary": "List schedules, by name",
                        "parameters": _query(after=NAME, limit=LIMIT),
                        "responses": {**_ok(schedules_page), **_problems(400, *_AUTH)}},
            },
            "/v1/schedules/{name}": {
                "get": {"summary": "A schedule and its next occurrences", "parameters": [
                    *_NAME, {"name": "n", "in": "query", "required": False, "schema": LIMIT,
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
                                "schema": DURATION_TEXT,
                                "description": "How far back (default 1d)"}],
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
