"""The rules of what awty accepts and sends, defined once: ``add`` refuses exactly what the
sender could not send, and ``add`` and the python worker agree on what a ``module:function``
looks like (what an id looks like is ``ids.py``'s). Stdlib only (the python worker imports it
on every call).

Every pattern is anchored with ``\\A…\\Z``: ``match``, ``fullmatch`` and ``search`` all mean
"the whole text" (``$`` would accept a trailing newline)."""

from __future__ import annotations

import re

# A python job's target: package.module:function (or Class.method).
PY_TARGET = re.compile(r"\A[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")
# An HTTP header name (RFC 9110 token).
HEADER_NAME = re.compile(r"\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
# What a header value may not contain: control characters other than tab (CR and LF would
# split the header; the others are refused by servers or mangled by proxies).
HEADER_VALUE_BAD = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
MAX_HEADER_VALUE = 4096  # characters
MAX_HEADERS = 32

# Headers awty writes itself, and the hop-by-hop ones that would change the message framing or
# the connection (RFC 9110 7.6.1): a job's headers may not replace, duplicate or add them.
RESERVED_HEADERS = frozenset({
    "host", "content-length", "content-type", "user-agent", "transfer-encoding", "connection",
    "keep-alive", "te", "trailer", "upgrade", "expect", "proxy-connection",
    "x-awty-job-id", "x-awty-check", "x-awty-attempt", "x-awty-schedule", "x-awty-occurrence",
})
# Every ``webhook-*`` name belongs to the Standard Webhooks signature (id, timestamp, signature
# and whatever later versions add).
RESERVED_PREFIX = "webhook-"


def message_id(job_id: str, check: int) -> str:
    """A callback's ``webhook-id``: one per check of a job, the same for that check's retries.
    A receiver deduplicating on it (as Standard Webhooks advises) still gets a job's second
    check; a job's id alone would make the second look like a repeat of the first. A ULID, an
    underscore and the check number: at most 34 printable characters (the spec allows 64)."""
    return f"{job_id}_{check:d}"


def is_reserved(name: str) -> bool:
    lname = name.lower()
    return lname in RESERVED_HEADERS or lname.startswith(RESERVED_PREFIX)


def header_refusal(name: object, value: object) -> str | None:
    """Why a job may not send this header (None: it may). The one rule for ``add`` and for the
    sender."""
    if not isinstance(name, str) or not HEADER_NAME.match(name):
        return f"{name!r} is not a valid header name"
    if is_reserved(name):
        return f"{name} is set by awty (or controls the connection) and cannot be given"
    if not isinstance(value, str) or HEADER_VALUE_BAD.search(value) \
            or len(value) > MAX_HEADER_VALUE:
        return (f"the value of {name} is not a single line of text of at most "
                f"{MAX_HEADER_VALUE} characters (no control characters)")
    return None
