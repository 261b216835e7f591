"""The worker process of the ``python`` kind: one process per call, so that a hung function can
be killed at its deadline with everything it started.

Protocol: the job and the attempt as one JSON document on stdin (``request``); the function is
called with a ``Call`` (the fields of the HTTP body); the answer as one JSON line
on the original stdout:
``{"ok": true, "kind": "none"|"datetime"|"timedelta", "value": ...}`` or
``{"ok": false, "error": "Type: message", "retryable": bool}``.
The function's own prints (fd 1 and fd 2) go to stderr, which the executor keeps as output.

Keep the imports lean: stdlib, ``awty.model`` and ``awty.wire`` only (it starts once per call).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, date, datetime, timedelta
from typing import Any

from awty.model import Attempt, Call, Job, Kind, Status
from awty.wire import PY_TARGET

TARGET = PY_TARGET  # the one rule, shared with add
MESSAGE_LIMIT = 4000  # characters of an exception message sent back (the executor cuts more)

_DATETIME_FIELDS = frozenset(("first_check_at", "next_check_at", "created_at", "updated_at",
                              "lease_until", "started_at", "occurrence"))


def job_to_dict(job: Job) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in Job._fields:
        value = getattr(job, name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Kind | Status):
            value = value.value
        out[name] = value
    return out


def request(target: str, job: Job, attempt: Attempt) -> bytes:
    """What the executor writes to the worker's stdin."""
    return json.dumps({"target": target, "job": job_to_dict(job),
                       "attempt": [attempt.slot, attempt.check, attempt.attempt,
                                   attempt.timeout]}).encode("utf-8")


def job_from_dict(data: dict[str, Any]) -> Job:
    values = {}
    for name, value in data.items():
        if name in _DATETIME_FIELDS and value is not None:
            value = datetime.fromisoformat(value)
        values[name] = value
    values["kind"] = Kind(values["kind"])
    if "status" in values:
        values["status"] = Status(values["status"])
    return Job(**values)


class BadTarget(Exception):
    """The target cannot be called: not worth retrying."""


def resolve(target: str) -> Any:
    if not TARGET.match(target):
        raise BadTarget(f"bad python target {target!r}: expected package.module:function")
    module_name, _, qualname = target.partition(":")
    import importlib

    try:
        obj: Any = importlib.import_module(module_name)
    except (ImportError, SyntaxError) as e:
        raise BadTarget(f"cannot import {module_name}: {type(e).__name__}: {e}") from e
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise BadTarget(f"{target}: {module_name} has no attribute {qualname!r}") from None
    if not callable(obj):
        raise BadTarget(f"{target} is not callable ({type(obj).__name__})")
    return obj


def encode(value: Any) -> dict[str, Any]:
    if value is None:
        return {"ok": True, "kind": "none", "value": None}
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return {"ok": True, "kind": "datetime", "value": value.isoformat()}
    if isinstance(value, timedelta):
        return {"ok": True, "kind": "timedelta", "value": value.total_seconds()}
    what = "a date without a time" if isinstance(value, date) else type(value).__name__
    return {"ok": False, "retryable": False,
            "error": f"returned {what}: expected None (done), a datetime or a timedelta "
                     f"(re-check)"}


def _error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
    return text[:MESSAGE_LIMIT]


def call(target: str, job: Call) -> dict[str, Any]:
    import traceback

    try:
        fn = resolve(target)
    except BadTarget as e:
        return {"ok": False, "retryable": False, "error": str(e)[:MESSAGE_LIMIT]}
    except BaseException as e:  # the module's own code failed at import: may be transient
        traceback.print_exc()
        return {"ok": False, "retryable": True, "error": "at import: " + _error(e)}
    try:
        value = fn(job)
        if hasattr(value, "__await__"):
            import asyncio
            import inspect

            if inspect.iscoroutine(value):
                value = asyncio.run(value)
            else:
                async def _await(aw: Any) -> Any:
                    return await aw

                value = asyncio.run(_await(value))
    except BaseException as e:  # SystemExit and KeyboardInterrupt are the function's answers too
        traceback.print_exc()
        return {"ok": False, "retryable": True, "error": _error(e)}
    return encode(value)


def main() -> int:
    # The answer goes to a private copy of stdout; fd 1 becomes stderr, so the function's
    # prints (and its children's) cannot corrupt the answer line. os.dup is non-inheritable.
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    data = json.loads(sys.stdin.buffer.read())
    job = job_from_dict(data["job"])
    if job.cwd and job.cwd not in sys.path[:1]:
        sys.path.insert(0, job.cwd)
    try:
        answer = call(data["target"], Call.of(job, Attempt(*data["attempt"])))
    finally:
        sys.stderr.flush()
    line = json.dumps(answer, separators=(",", ":")) + "\n"
    data = line.encode("utf-8")
    while data:
        n = os.write(answer_fd, data)
        data = data[n:]
    return 0


# How the executor starts the worker: ``-P`` keeps the job's directory off sys.path while the
# worker itself imports (a local ``json.py`` must not break it); awty's own location is
# appended as a fallback for a source checkout that is not installed.
def bootstrap(awty_parent: str) -> str:
    return (f"import sys; sys.path.append({awty_parent!r}); "
            "from awty.executors.pyworker import main; sys.exit(main())")


if __name__ == "__main__":
    sys.exit(main())
