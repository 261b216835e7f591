"""Reading a request body: at most ``serve_max_body`` bytes (413 past it, read no further),
JSON (400 naming what is wrong, never a 500)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from .problems import Problem

# A body over the limit is read (and dropped) up to this many times the limit before the 413:
# a client still writing when the server answers and closes gets a broken pipe, not the answer.
DRAIN = 4


async def read_bytes(request: Request) -> bytes:
    limit = request.app.state.options.max_body
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
        elif size > DRAIN * limit:
            break  # past this, the client's write may fail before it reads the 413
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
