"""Commands that hook awty into the machine: ``completion`` (a shell script for the rc file)
and ``systemd`` (user timers for this home, the alternative to ``crontab``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import InvalidInput
from . import render as r
from .argv import COMPLETE_VAR
from .options import Home, new_app, open_awty, reports_errors

commands = new_app()

SHELLS = ("bash", "zsh", "fish")


def enable_completion() -> None:
    """Register the shells' completion classes: done only when the shell asks for completions,
    so that no other command pays for them."""
    from typer._completion_classes import completion_init

    completion_init()


@commands.command()
@reports_errors
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh or fish.", show_default=False)],
) -> None:
    """Print the shell completion script for awty. Load it from your shell's rc file:

      bash (~/.bashrc):    eval "$(awty completion bash)"

      zsh (~/.zshrc):      eval "$(awty completion zsh)"

      fish (~/.config/fish/config.fish):   awty completion fish | source

    Completion runs awty only when you press Tab; other commands do not load it.
    """
    if shell not in SHELLS:
        raise InvalidInput(f"shell {shell!r}: use one of {', '.join(SHELLS)}")
    from typer._completion_shared import get_completion_script

    r.out(get_completion_script(prog_name="awty", complete_var=COMPLETE_VAR, shell=shell))


@commands.command()
@reports_errors
def systemd(
    install: Annotated[bool, typer.Option("--install", help="Write the units into your "
                                          "systemd user directory (with --system: "
                                          "/etc/systemd/system) instead of printing "
                                          "them.")] = False,
    awty_bin: Annotated[Optional[str], typer.Option(help="The awty command the units run "
                                                    "(default: this awty).")] = None,
    system: Annotated[bool, typer.Option("--system", help="System units instead, run as "
                                         "--user; home /var/lib/awty unless --home or "
                                         "AWTY_HOME says otherwise.")] = False,
    user: Annotated[str, typer.Option("--user", help="With --system: the account the "
                                      "services run as.")] = "awty",
    unit_dir: Annotated[Optional[Path], typer.Option(
        "--unit-dir", help="With --install: write the units here instead (a package's build "
        "root, say).", show_default=False)] = None,
    home: Home = None,
) -> None:
    """Print (or --install) systemd timers that run this home: run-slot at every slot
    boundary, catchup after boot and hourly. An alternative to `awty crontab`. User units by
    default; --system for a server's service account (User=awty, home /var/lib/awty).

    Examples:

      awty systemd                  # print the four units

      awty systemd --install        # then: systemctl --user daemon-reload, and enable --now

      awty systemd --system         # as system units (install them as root)
    """
    import os

    from .. import systemd as units
    from .ops import refuse_unkept_database_url

    if system and home is None and not os.environ.get("AWTY_HOME"):
        home = units.SYSTEM_HOME
    a = open_awty(home)
    store = refuse_unkept_database_url(a, "systemd")
    a.load_cluster()  # the cluster's resolution, on PostgreSQL
    rendered = units.render(a.home, a.settings.resolution, awty_bin, store=store,
                            system_user=user if system else None)
    if not install:
        for name, text in rendered.items():
            r.out(f"# --- {name}")
            r.out(text)
        return
    where = unit_dir or (units.SYSTEM_UNIT_DIR if system else units.user_unit_dir())
    changed = units.install(rendered, where)
    r.out(f"wrote {', '.join(p.name for p in changed)} in {where}" if changed
          else f"already installed (unchanged) in {where}")
    if system:
        r.out(f"next: id {user} || useradd --system --home-dir {a.home} {user}")
        r.out("      systemctl daemon-reload && systemctl enable --now " + " ".join(units.TIMERS))
        return
    r.out("next: systemctl --user daemon-reload && systemctl --user enable --now "
          + " ".join(units.TIMERS))
    r.out('      loginctl enable-linger "$USER"   # keep them running while logged out')
