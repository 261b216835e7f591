"""The log file in home: one line per slot run and per problem, rotated by size. Secrets are
never passed to it (the signing secret lives only in the HTTP executor)."""

from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path


def open_log(home: Path, max_bytes: int) -> logging.Logger:
    log = logging.getLogger(f"awty.{home}")
    if not log.handlers:
        path = home / "awty.log"
        try:
            if not path.exists():
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
            handler: logging.Handler = RotatingFileHandler(path, maxBytes=max_bytes,
                                                           backupCount=3, delay=True)
        except OSError:
            handler = logging.NullHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s pid=%(process)d "
                                               "%(message)s", "%Y-%m-%dT%H:%M:%S%z"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log
