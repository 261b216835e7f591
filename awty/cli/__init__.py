"""The ``awty`` command line: parse, call one ``Awty`` method, render. Nothing else lives here.

- ``options``: the app settings, shared options, opening an ``Awty``, errors -> exit codes
- ``jobs``: add, cancel, reschedule, list, show, history, retry
- ``runs``: slots, run-slot, catchup
- ``ops``: init, doctor, crontab, stats, prune, version
- ``secret``: secret new, verify
- ``render``: plain lines, Rich tables and progress, ``--json`` documents

Only this package imports typer or rich, and nothing below it imports it."""

from __future__ import annotations

import sys

import typer

from . import jobs, ops, runs, secret
from .options import new_app

# The order `awty --help` lists the commands in.
_ORDER = ("init", "add", "cancel", "reschedule", "list", "show", "slots", "run-slot", "catchup",
          "history", "retry", "version", "verify", "doctor", "crontab", "stats", "prune")


def _name(command) -> str:
    return command.name or command.callback.__name__.replace("_", "-")


app = new_app(
    no_args_is_help=True,
    help="awty — Are We There Yet? Schedule future checks and signed HTTP callbacks; "
         "a plain cron entry (`awty run-slot`) fires them.\n\n"
         "Quick tour:\n\n"
         "  awty add https://example.com/hook --in 2h --payload '{\"order\": 42}'\n\n"
         "  awty list\n\n  awty crontab --install\n\n  awty history",
)
# The command modules' commands sit flat on the app (`awty add`, not `awty jobs add`).
app.registered_commands = sorted(
    (c for m in (jobs, runs, ops, secret) for c in m.commands.registered_commands),
    key=lambda c: _ORDER.index(_name(c)))
app.add_typer(secret.secret_app, name="secret")


def main() -> None:
    _app_for(sys.argv[1:])()


def _app_for(args: list[str]) -> typer.Typer:
    """The app to run: when the first word names a plain command, a one-command app. Typer
    builds every command's parameters before dispatching (~12 ms for all of them); `awty add`
    under a crontab or a script loop should pay only for its own."""
    name = args[0] if args else ""
    if name.startswith("-"):
        return app
    found = [c for c in app.registered_commands if _name(c) == name]
    if len(found) != 1:
        return app  # help, a typo (suggestions), or a sub-app such as `secret`
    one = new_app()
    one.registered_commands = found
    one.callback()(_no_options)  # keep it a group, so `awty NAME …` parses as with the full app
    return one


def _no_options() -> None:
    pass

