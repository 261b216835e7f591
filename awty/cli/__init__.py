"""The ``awty`` command line: parse, call one ``Awty`` method, render. Nothing else lives here.

- ``options``: the app settings, shared options, ``reports_errors`` for each command
- ``session``: the ``--database-url`` given, opening and closing an ``Awty``, errors -> exit
  codes (no Typer: the quick paths ``quickadd`` and ``quickrun`` share it)
- ``jobs``: add, cancel, reschedule, list, show, history, retry
- ``runs``: slots, run, run-slot, catchup
- ``ops``: init, config, doctor, crontab, stats, prune, export, import, version
- ``secret``: secret new, verify
- ``schedule``: schedule add, list, show, next, pause, resume, remove, run, import-crontab
- ``serving``: serve, metrics, token new|list|revoke
- ``setup``: completion, systemd
- ``receiver``: the test receiver (``awty.testing.receiver``) as ``awty receiver``
- ``argv``: global options before the command, ``--version``, ``help CMD`` (plain list work)
- ``tables``: fitting a table to the terminal, plain columns for pipes
- ``render``: plain lines, Rich tables and progress, ``--json`` documents
- ``closedpipe``: stdout for a reader that stops reading (``awty list | head -1``)

Only this package imports typer or rich, and nothing below it imports it."""

from __future__ import annotations

import os
import sys

from .argv import COMPLETE_VAR, normalise

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

    import typer
    from typer.models import CommandInfo

# Each command and the module defining it, in the order `awty --help` lists them. `awty NAME`
# imports only NAME's module; the whole app checks this table against the modules.
COMMANDS = {
    "init": "ops", "add": "jobs", "cancel": "jobs", "reschedule": "jobs", "list": "jobs",
    "show": "jobs", "slots": "runs", "run": "runs", "run-slot": "runs", "catchup": "runs",
    "history": "jobs",
    "retry": "jobs", "version": "ops", "verify": "secret", "doctor": "ops", "crontab": "ops",
    "stats": "ops", "prune": "ops", "export": "ops", "import": "ops", "systemd": "setup",
    "completion": "setup", "config": "ops", "serve": "serving", "metrics": "serving",
    "receiver": "receiver",
}

HELP = ("awty — Are We There Yet? Schedule future checks and signed HTTP callbacks; "
        "a plain cron entry (`awty run-slot`) fires them.\n\n"
        "Quick tour:\n\n"
        "  awty add https://example.com/hook --in 2h --payload '{\"order\": 42}'\n\n"
        "  awty list\n\n  awty crontab --install\n\n  awty history\n\n"
        "--home DIR, --database-url URL (PostgreSQL: several hosts), --json and --utc go "
        "before or after the command. "
        "`awty help CMD` (or `awty CMD --help`) shows a command's help; `awty --version`.")


def main() -> None:
    from .closedpipe import QuietStdout

    if not isinstance(sys.stdout, QuietStdout):
        sys.stdout = QuietStdout(sys.stdout)
    args = normalise(sys.argv[1:])
    if os.environ.get(COMPLETE_VAR):
        # The shell asks for completions (`awty completion` wrote the hook): only then load
        # the completion machinery and every command.
        from .setup import enable_completion

        enable_completion()
        _whole_app()(args=args, prog_name="awty", complete_var=COMPLETE_VAR)
        return
    if args[:1] == ["add"]:
        from .quickadd import run

        if run(args[1:]):
            return
    if args[:2] == ["schedule", "add"]:
        from .quickadd import run_schedule

        if run_schedule(args[2:]):
            return
    if args[:1] == ["run-slot"]:
        from .quickrun import run as run_quick

        if run_quick(args[1:]):
            return
    _app_for(args)(args=args)


def _app_for(args: list[str]) -> typer.Typer:
    """The app to run: when the first word names a plain command, a one-command app. Typer
    builds every command's parameters before dispatching (~12 ms for all of them); `awty add`
    under a crontab or a script loop should pay only for its own."""
    from .options import new_app

    name = args[0] if args else ""
    module = COMMANDS.get(name)
    if module is None:
        return _whole_app()  # help, a typo (suggestions), or a sub-app such as `secret`
    # __import__, not importlib.import_module: -X importtime (and so the bench) sees it
    __import__(f"{__name__}.{module}")
    one = new_app()
    one.registered_commands = [c for c in sys.modules[f"{__name__}.{module}"]
                               .commands.registered_commands if _name(c) == name]
    one.callback()(_no_options)  # keep it a group, so `awty NAME …` parses as with the full app
    return one


def _no_options() -> None:
    pass


def _name(command: CommandInfo) -> str:
    assert command.callback is not None  # every awty command is registered with its function
    return command.name or command.callback.__name__.replace("_", "-")


_app: list[typer.Typer] = []


def _whole_app() -> typer.Typer:
    if not _app:
        from . import jobs, ops, receiver, runs, schedule, secret, serving, setup
        from .options import new_app

        defined = {_name(c): c for m in (jobs, runs, ops, setup, secret, schedule, serving,
                                         receiver)
                   for c in m.commands.registered_commands}
        if set(defined) != set(COMMANDS):
            raise RuntimeError(f"awty.cli.COMMANDS is out of step with the command modules: "
                               f"{sorted(set(defined) ^ set(COMMANDS))}")
        app = new_app(no_args_is_help=True, help=HELP)
        app.registered_commands = [defined[name] for name in COMMANDS]
        app.add_typer(secret.secret_app, name="secret")
        app.add_typer(schedule.schedule_app, name="schedule")
        app.add_typer(serving.token_app, name="token")
        _app.append(app)
    return _app[0]


def __getattr__(name: str) -> Any:
    """``awty.cli.app``, the whole app (help, tests), built on first use."""
    if name == "app":
        return _whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
