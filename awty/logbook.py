"""The log file in home: one line per slot run and per problem, rotated by size. Secrets are
never passed to it (the signing secret lives only in the HTTP executor). ``log_format =
"json"``: one JSON object a line instead, for a log shipper: time, level, host, pid, command,
slot, job, outcome and message (a line's fields come from its ``extra={"awty": {...}}``)."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from io import TextIOWrapper
from logging.handlers import RotatingFileHandler
from pathlib import Path

from .safeio import NOFOLLOW, write_new


class _PrivateRotatingFileHandler(RotatingFileHandler):
    """Every file it opens (the first, and each one after a rotation) is created 0600 whatever
    the umask and never through a symlink; undecodable text (a file name with stray bytes) is
    escaped, not an error."""

    def _open(self) -> TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW, 0o600)
        # "a": RotatingFileHandler's mode whenever it rotates (self.mode), and the file is
        # opened O_APPEND above
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def handleError(self, record: logging.LogRecord) -> None:
        """A line that cannot be written (a full or read-only disk) is dropped: logging's
        default prints a traceback on stderr, and the CLI promises one clear line."""


class JsonLines(logging.Formatter):
    """One JSON object a line; every key present on every line (null when unknown)."""

    def __init__(self) -> None:
        super().__init__()
        self.host = socket.gethostname()

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "awty", None) or {}
        return json.dumps({
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"), "level":
            record.levelname.lower(), "host": self.host, "pid": record.process,
            "command": _command(), "slot": fields.get("slot"), "job": fields.get("job"),
            "outcome": fields.get("outcome"), "message": record.getMessage()},
            ensure_ascii=False)


def _command() -> str | None:
    """The awty command this process runs (``run-slot``), from its arguments; None when awty
    is a library inside another program."""
    if os.path.basename(sys.argv[0]) not in ("awty", "__main__.py"):
        return None
    args = iter(sys.argv[1:])
    for a in args:
        if a in ("--home", "--database-url"):
            next(args, None)
        elif not a.startswith("-"):
            return a
    return None


def open_log(home: Path, max_bytes: int, fmt: str = "text") -> logging.Logger:
    log = logging.getLogger(f"awty.{home}")
    if not log.handlers:
        path = home / "awty.log"
        try:
            write_new(path, b"")  # a planted symlink is refused (ELOOP), never written through
            handler: logging.Handler = _PrivateRotatingFileHandler(
                path, maxBytes=max_bytes, backupCount=3, delay=True, encoding="utf-8",
                errors="backslashreplace")
        except OSError:
            handler = logging.NullHandler()
        handler.setFormatter(JsonLines() if fmt == "json" else logging.Formatter(
            "%(asctime)s %(levelname)s pid=%(process)d %(message)s", "%Y-%m-%dT%H:%M:%S%z"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log
