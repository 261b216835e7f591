"""Text both stores can keep, the same on each. PostgreSQL refuses a NUL and anything that is
not UTF-8 (its write fails, and with it the write of every row beside it); SQLite would keep a
NUL but Python refuses to hand it a lone surrogate. So what a job answers (a response body, a
command's output, an error) is escaped, never refused: a NUL becomes the four characters
``\\x00``, an undecodable byte ``\\xNN`` (Python's ``backslashreplace``), a lone surrogate
``\\xNN`` when it stands for an undecodable byte (``surrogateescape``), else ``\\uXXXX``.
What a user gives at ``add`` (or ``import``) is refused instead (``is_storable``): a job's
target or key must mean what was typed."""

from __future__ import annotations

import re

_BAD = re.compile("[\x00\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c == 0:
        return "\\x00"
    if 0xDC80 <= c <= 0xDCFF:  # surrogateescape: the byte it stood for
        return f"\\x{c - 0xDC00:02x}"
    return f"\\u{c:04x}"


def storable(text: str) -> str:
    """``text`` with every NUL and lone surrogate escaped (see the module)."""
    if text.isascii():
        return text.replace("\0", "\\x00") if "\0" in text else text
    return _BAD.sub(_escape, text)


def text_of(raw: bytes) -> str:
    """Bytes a job answered, as storable text: UTF-8, undecodable bytes escaped."""
    return storable(raw.decode("utf-8", "backslashreplace"))


def is_storable(text: str) -> bool:
    """False for text a store cannot keep as given: a NUL, or a lone surrogate (undecodable
    argv bytes under surrogateescape, a JSON ``"\\ud800"`` escape)."""
    if text.isascii():
        return "\0" not in text
    return _BAD.search(text) is None
