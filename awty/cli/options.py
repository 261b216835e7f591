"""What every command module shares: the Typer app settings, the common options (``--home``,
``--json``, ``--utc``, ``--database-url``), and ``reports_errors``, which runs a command in
the session (``session``: opening an ``Awty``, errors -> exit codes) the quick paths share.
Usage errors from the parser are shown as one line too (``_OneLineGroup``)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional, ParamSpec, TypeVar

import typer
from typer.core import TyperGroup

from ..errors import InvalidInput
from . import render as r
from .argv import normalise, unpassable
from .runslot import slot_arg as slot_arg  # the commands' one reading of a slot id
from .session import command_env as command_env
from .session import open_awty as open_awty
from .session import reporting_errors, take_given


class _OneLineGroup(TyperGroup):
    """A usage error is one line on stderr and exit 2, like every other bad input."""

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        # global options before the command, --version, help CMD (awty.cli.argv); idempotent,
        # so the entry point may have done it already
        args = take_given(normalise(list(sys.argv[1:] if args is None else args)))
        bad = unpassable(args)
        if bad is not None:
            r.err(f"awty: {bad}")
            sys.exit(2)
        kwargs["standalone_mode"] = False
        try:
            code = super().main(args, *rest, **kwargs)
        except Exception as e:
            # click's errors, matched by name and attribute: typer may raise its own copy's
            ctx: Any = getattr(e, "ctx", None)
            if type(e).__name__ == "NoArgsIsHelpError":
                # bare `awty` or `awty secret`: the help, as git shows it, and success
                r.out(ctx.get_help())
                sys.exit(0)
            if hasattr(e, "format_message") and hasattr(e, "exit_code"):
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

# The job options of `awty add`, shared with `awty schedule add` (whose occurrences are jobs).
Exec = Annotated[bool, typer.Option("--exec", help="TARGET is a shell command (/bin/sh -c), "
                                    "run in this directory, payload on stdin.")]
Call = Annotated[bool, typer.Option("--call", help="TARGET is package.module:function, "
                                    "called with the job; the module must be found from "
                                    "this directory (not imported at add).")]
Payload = Annotated[Optional[str], typer.Option(help="JSON payload, @file, or - for stdin.")]
Entity = Annotated[Optional[str], typer.Option(help="What the job checks (e.g. order).")]
Key = Annotated[Optional[str], typer.Option(help="Which one (e.g. 42); needs --entity.")]
Header = Annotated[Optional[list[str]], typer.Option(
    help="Extra request header 'Name: value' (repeatable).")]
MaxChecks = Annotated[Optional[int], typer.Option(help="Re-checks allowed (default 5).")]
Horizon = Annotated[Optional[str], typer.Option(help="Furthest re-check (default 7d).")]
Timeout = Annotated[Optional[str], typer.Option(help="Per execution (default 30s).")]
MaxAttempts = Annotated[Optional[int], typer.Option(help="Attempts on failure (default 6).")]
MisfireGrace = Annotated[Optional[str], typer.Option(
    help="With catchup --misfire skip: how late this job may still fire.")]


P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(fn: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with reporting_errors(_exit):
            return fn(*args, **kwargs)
    return wrapper


def _exit(code: int) -> NoReturn:
    raise typer.Exit(code) from None


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
