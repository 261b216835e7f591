"""One command line's session, free of Typer so that the quick paths (``quickadd``,
``quickrun``) and the Typer app share it: the ``--database-url`` it gave, the ``Awty`` it
opened (closed when the command ends), and the one place errors become exit codes.

The library raises ``AwtyError`` subclasses; ``reporting_errors`` prints one line on stderr and
exits with the error's code (1 could not be done, 2 bad input)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import AwtyError
from . import render as r
from .argv import take_database_url

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from ..api import Awty

# `--database-url` of the command line being run: a global option, taken out of the arguments
# before they are parsed (``take_given``), so every command accepts it.
_given: dict[str, str | None] = {"database_url": None}
_opened: list[Any] = []


def take_given(args: list[str]) -> list[str]:
    """``args`` without ``--database-url``, which is kept for ``open_awty``; idempotent."""
    args, _given["database_url"] = take_database_url(args)
    return args


def given_database_url() -> str | None:
    """``--database-url`` of the command line being run, if one was given."""
    return _given["database_url"]


def command_env() -> dict[str, str]:
    """The environment as this command line sets it: ``--database-url`` is the
    AWTY_DATABASE_URL setting for this run (for code that builds its own ``Awty``)."""
    import os

    env = dict(os.environ)
    if _given["database_url"] is not None:
        env["AWTY_DATABASE_URL"] = _given["database_url"]
    return env


def open_awty(home: Path | None, **kw: Any) -> Awty:
    """The ``Awty`` a command works on, closed when the command ends; the facade (and
    everything behind it) loads here, on first use, not when the CLI is imported."""
    from ..api import Awty

    if _given["database_url"] is not None:
        kw.setdefault("database_url", _given["database_url"])
    a = Awty(home, **kw)
    _opened.append(a)
    return a


def close_opened() -> None:
    """Close what the command opened (a PostgreSQL pool has threads to stop); a failure to
    close must not hide the command's own outcome."""
    while _opened:
        a = _opened.pop()
        for note in a.notes:
            r.err(f"awty: warning: {note}")
        try:
            a.close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


@contextmanager
def reporting_errors(exit: Callable[[int], NoReturn] = sys.exit) -> Iterator[None]:
    """Run a command: an ``AwtyError`` or Ctrl-C is one line on stderr and ``exit(code)``;
    what it opened is closed either way. The Typer app passes an ``exit`` raising
    ``typer.Exit``."""
    try:
        yield
    except AwtyError as e:
        # one line, whatever the message quotes (a file name may hold a newline)
        r.err("awty: " + str(e).replace("\r", "\\r").replace("\n", "\\n"))
        exit(e.exit_code)
    except KeyboardInterrupt:
        r.err("awty: interrupted")
        exit(130)
    finally:
        close_opened()
