"""What every command module shares: the Typer app settings, the common options (``--home``,
``--json``, ``--utc``, ``--database-url``), opening an ``Awty``, and the one place errors
become exit codes.

Errors: the library raises ``AwtyError`` subclasses; ``reports_errors`` prints one line on
stderr and exits with the error's code (1 could not be done, 2 bad input). Usage errors from
the parser are shown as one line too (``_OneLineGroup``)."""

from __future__ import annotations

import functools
import sys
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from ..errors import AwtyError, InvalidInput
from . import render as r
from .argv import normalise, take_database_url
from .runslot import slot_arg as slot_arg  # the commands' one reading of a slot id

# `--database-url` of the command line being run: a global option, taken out of the arguments
# before Typer parses them (argv.take_database_url), so every command accepts it.
_given: dict[str, str | None] = {"database_url": None}


class _OneLineGroup(TyperGroup):
    """A usage error is one line on stderr and exit 2, like every other bad input."""

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        # global options before the command, --version, help CMD (awty.cli.argv); idempotent,
        # so the entry point may have done it already
        args, _given["database_url"] = take_database_url(
            normalise(list(sys.argv[1:] if args is None else args)))
        kwargs["standalone_mode"] = False
        try:
            code = super().main(args, *rest, **kwargs)
        except Exception as e:
            if type(e).__name__ == "NoArgsIsHelpError":
                # bare `awty` or `awty secret`: the help, as git shows it, and success
                r.out(e.ctx.get_help())
                sys.exit(0)
            if hasattr(e, "format_message") and hasattr(e, "exit_code"):
                ctx = getattr(e, "ctx", None)
                where = f"awty {ctx.info_name}: " if ctx is not None and ctx.parent else "awty: "
                r.err(where + e.format_message().splitlines()[0]
                      + ("  (see --help)" if e.exit_code == 2 else ""))
                sys.exit(e.exit_code)
            if type(e).__name__ == "Abort":
                r.err("aborted")
                sys.exit(1)
            raise
        sys.exit(code if isinstance(code, int) else 0)


def new_app(**kw: Any) -> typer.Typer:
    """A Typer app as awty's commands want it: one-line usage errors, plain help, no
    completion (its import costs every `awty add`), and never a traceback showing locals
    (they can hold the signing secret)."""
    return typer.Typer(cls=_OneLineGroup, rich_markup_mode=None, add_completion=False,
                       pretty_exceptions_show_locals=False,
                       context_settings={"help_option_names": ["-h", "--help"]}, **kw)


def new_group(**kw: Any) -> typer.Typer:
    """A sub-command group (``awty secret …``), mounted on the app with ``add_typer``."""
    return typer.Typer(cls=_OneLineGroup, rich_markup_mode=None, no_args_is_help=True, **kw)


Home = Annotated[Optional[Path], typer.Option(
    "--home", help="awty's home directory (default: $AWTY_HOME, else ~/.local/share/awty).",
    show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
Utc = Annotated[bool, typer.Option("--utc", help="Show times in UTC instead of local time.")]


def reports_errors(fn):
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AwtyError as e:
            r.err(f"awty: {e}")
            raise typer.Exit(e.exit_code) from None
        except KeyboardInterrupt:
            r.err("awty: interrupted")
            raise typer.Exit(130) from None
        finally:
            _close_opened()
    return wrapper


_opened: list[Any] = []


def _close_opened() -> None:
    """Close what the command opened (a PostgreSQL pool has threads to stop); a failure to
    close must not hide the command's own outcome."""
    while _opened:
        try:
            _opened.pop().close()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def given_database_url() -> str | None:
    """``--database-url`` of the command line being run, if one was given."""
    return _given["database_url"]


def open_awty(home: Path | None, **kw: Any):
    """The ``Awty`` a command works on; the facade (and everything behind it) loads here, on
    first use, not when the CLI is imported."""
    from ..api import Awty

    if _given["database_url"] is not None:
        kw.setdefault("database_url", _given["database_url"])
    a = Awty(home, **kw)
    _opened.append(a)
    return a


def command_env() -> dict[str, str]:
    """The environment as this command line sets it: ``--database-url`` is the
    AWTY_DATABASE_URL setting for this run (for code that builds its own ``Awty``)."""
    import os

    env = dict(os.environ)
    if _given["database_url"] is not None:
        env["AWTY_DATABASE_URL"] = _given["database_url"]
    return env


def positive_duration(text: str, option: str) -> timedelta:
    """A duration option that must be more than zero (``--window 1d``, ``--older-than 30d``)."""
    from ..slots import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise InvalidInput(f"{option}: {e}") from None
    if seconds <= 0:
        raise InvalidInput(f"{option}: must be more than zero")
    return timedelta(seconds=seconds)
