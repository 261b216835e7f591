"""What the test receiver exchanges: the ``Request`` it records, the ``Reply`` it gives and
the short ``Logged`` line it keeps per request (``awty.testing.receiver`` re-exports them)."""

from __future__ import annotations

import json as _json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Reply:
    """One scripted answer. See the module docstring for what each field does."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | str = b""
    json: Any = None
    delay: float = 0.0
    hang: bool = False
    trickle: float | None = None
    close: bool = False
    close_after: bool = False
    close_if_reused: bool = False
    body_size: int | None = None

    def payload(self) -> bytes:
        if self.json is not None:
            return _json.dumps(self.json).encode()
        if isinstance(self.body, str):
            return self.body.encode()
        return bytes(self.body)


@dataclass(frozen=True)
class Request:
    """A request as received."""

    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes
    at: float  # time.time() on arrival
    connection: int  # which accepted connection carried it (1-based)
    raw_headers: list[tuple[str, str]] = field(default_factory=list)  # as sent, in order
    n: int = 0  # arrival number (1-based), across every path

    def json(self) -> Any:
        return _json.loads(self.body)

    @property
    def job_id(self) -> str | None:
        """``X-Awty-Job-Id``: the job's id (the same for each of its checks and retries)."""
        return self.headers.get("x-awty-job-id")

    @property
    def message_id(self) -> str | None:
        """``webhook-id``: one per check of a job, the same for that check's retries."""
        return self.headers.get("webhook-id")

    @property
    def attempt(self) -> int | None:
        return as_int(self.headers.get("x-awty-attempt"))

    @property
    def check(self) -> int | None:
        return as_int(self.headers.get("x-awty-check"))

    def signature_error(self, secret: str, now: datetime | None = None,
                        tolerance: float = 300) -> str | None:
        """None when the Standard Webhooks signature is good for ``secret`` (``whsec_…``),
        else what is wrong. Without ``now`` the timestamp's age is not checked: an awty whose
        clock is pinned (``AWTY_NOW``, as in the demo) signs with its own time."""
        from ..clock import SystemClock
        from ..errors import InvalidInput
        from ..signing import parse_secret, verify

        if now is None:
            now = SystemClock().now()
            ts = as_int(self.headers.get("webhook-timestamp"))
            if ts is not None:
                try:
                    now = datetime.fromtimestamp(ts, UTC)
                except (OverflowError, ValueError, OSError):
                    pass  # out of range: checked against the real time, and refused
        try:
            verify(parse_secret(secret), self.headers, self.body, now, tolerance)
        except InvalidInput as e:
            return str(e)
        return None


class Logged(NamedTuple):
    """The short line ``log()`` keeps per request."""

    path: str  # without the query string
    job_id: str | None
    attempt: int | None
    slot: str | None  # the callback body's "slot"


def free_port() -> int:
    """A TCP port on 127.0.0.1 with nothing listening (connecting to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def as_int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def slot_of(body: bytes) -> str | None:
    """The ``slot`` of an awty callback body; None for any other body."""
    if body[:1] != b"{":
        return None
    try:
        doc = _json.loads(body)
    except (ValueError, RecursionError):
        return None
    slot = doc.get("slot") if isinstance(doc, dict) else None
    return slot if isinstance(slot, str) else None


def as_reply(out: Any) -> Reply:
    """What a ``reply`` function returned (a status, ``(status, headers, body)`` or a
    ``Reply``) as a ``Reply``."""
    if isinstance(out, Reply):
        return out
    if isinstance(out, int):
        return Reply(status=out)
    status, headers, body = out
    return Reply(status=status, headers=headers or {}, body=body)
