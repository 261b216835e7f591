"""Reading a request body: at most ``serve_max_body`` bytes (413 past it, read no further),
JSON (400 naming what is wrong, never a 500)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.requests import ClientDisconnect, Request

from .problems import Problem

# A body over the limit is read (and dropped) before the 413, up to this many times the limit
# or this many seconds, whichever comes first (nginx's lingering close): a client still writing
# when the server answers and closes gets a connection reset, not the answer.
DRAIN = 64
LINGER = 2.0


async def read_bytes(request: Request) -> bytes:
    limit = request.app.state.options.max_body
    chunks, size, until = [], 0, 0.0
    stream = request.stream().__aiter__()
    try:
        while True:
            if until:  # past the limit: drain only while the client keeps sending
                chunk = await asyncio.wait_for(anext(stream), until - time.monotonic())
            else:
                chunk = await anext(stream)
            size += len(chunk)
            if size <= limit:
                chunks.append(chunk)
                continue
            until = until or time.monotonic() + LINGER
            if size > DRAIN * limit or time.monotonic() > until:
                break
    except (StopAsyncIteration, TimeoutError):
        pass
    except ClientDisconnect:
        if size <= limit:  # nobody is left to answer: no 500, no traceback in the log
            raise Problem(400, "the client went away before the end of the body") from None
    if size > limit:
        raise Problem(413, f"the body is over {limit:,} bytes (serve_max_body)")
    return b"".join(chunks)


def parse_json(raw: bytes, what: str = "the body") -> Any:
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise Problem(400, f"{what} is not UTF-8") from None
    except ValueError as e:
        raise Problem(400, f"{what} is not JSON ({e})") from None
    except RecursionError:
        raise Problem(400, f"{what}: JSON nested too deeply") from None


async def read_json(request: Request) -> Any:
    raw = await read_bytes(request)
    if not raw.strip():
        return {}
    return parse_json(raw)


def read_lines(raw: bytes) -> list[Any]:
    """A batch body: a JSON array, or JSON lines (one job a line, blank lines skipped)."""
    text = raw.lstrip()
    if text.startswith(b"["):
        items = parse_json(raw)
        if not isinstance(items, list):
            raise Problem(400, "the body is not a JSON array")
        return items
    out = []
    for n, line in enumerate(raw.splitlines(), 1):
        if line.strip():
            try:
                out.append(parse_json(line, f"line {n}"))
            except Problem as p:
                p.index = len(out)
                raise
    return out
