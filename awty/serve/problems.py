"""Errors as RFC 9457 ``application/problem+json``: the status, the one line the CLI prints for
the same error (``detail``), and the field at fault when the message names one."""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.responses import Response

from ..errors import (
    AwtyError, Busy, Conflict, InvalidInput, JobNotFound, ScheduleExists, ScheduleNotFound,
    StoreError,
)

PROBLEM_TYPE = "application/problem+json"
TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
          405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large",
          415: "Unsupported Media Type", 429: "Too Many Requests", 503: "Service Unavailable"}
# "line 3: payload: not JSON" -> index 2, field payload (an add --batch line's numbering)
_LINE = re.compile(r"^line (\d+): ")
# "in: not a duration…", "target 'http://…': … always refused"; "missed-window: …" (a message
# that names the CLI option) is the field missed_window
_FIELD = re.compile(r"^([a-z][a-z_-]*)(?=: | ')")


class Problem(Exception):
    """An answer other than success; ``detail`` is one line."""

    def __init__(self, status: int, detail: str, *, field: str | None = None,
                 index: int | None = None, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.detail, self.field, self.index = status, detail, field, index
        self.headers = headers or {}
        self.extra = extra

    def response(self) -> Response:
        doc: dict[str, Any] = {"type": "about:blank", "title": TITLES.get(self.status, "Error"),
                               "status": self.status, "detail": self.detail}
        if self.field is not None:
            doc["field"] = self.field
        if self.index is not None:
            doc["index"] = self.index
        doc.update(self.extra)
        return Response(json.dumps(doc, ensure_ascii=False), self.status,
                        headers=self.headers, media_type=PROBLEM_TYPE)


def status_of(e: AwtyError) -> int:
    if isinstance(e, ScheduleExists):
        return 409
    if isinstance(e, InvalidInput):
        return 400
    if isinstance(e, (JobNotFound, ScheduleNotFound)):
        return 404
    if isinstance(e, (Busy, StoreError)):
        return 503
    if isinstance(e, Conflict):
        return 409
    return 409  # what could not be done as the store stands (a moved home, a refusal)


def from_error(e: AwtyError, *, batch: bool = False) -> Problem:
    """The problem for a library error: its message as the CLI prints it, the field it names,
    and for a batch the index (0-based) of the item at fault."""
    detail = str(e)
    rest, index = detail, None
    m = _LINE.match(detail)
    if m and batch:
        index, rest = int(m.group(1)) - 1, detail[m.end():]
    f = _FIELD.match(rest)
    field = f.group(1).replace("-", "_") if f and f.group(1) not in ("line", "id") else None
    return Problem(status_of(e), detail, field=field, index=index)
