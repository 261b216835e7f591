"""systemd units for a home: the timer/service pairs shipped in ``awty/data/``, rendered with
this home's awty command, ``--home`` and slot resolution: user units (the user's own manager),
or system units (``system``: run as a service account, ``User=awty``, with a home under
/var/lib/awty that systemd makes for it).

The shipped files are usable by hand (they run ``~/.local/bin/awty`` on the default home);
``render`` rewrites their ``ExecStart=`` and ``OnCalendar=`` lines. Calendar times are written
in UTC: slots are UTC boundaries, so the timers are right in every zone, half-hour ones too."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from .crontab import catchup_minute, default_bin, one_line
from .slots import check_resolution

DATA = Path(__file__).resolve().parent / "data"
UNITS = ("awty-run-slot.service", "awty-run-slot.timer", "awty-catchup.service",
         "awty-catchup.timer")
TIMERS = tuple(u for u in UNITS if u.endswith(".timer"))
SYSTEM_HOME = Path("/var/lib/awty")  # StateDirectory=awty: made by systemd, owned by User=
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")


def shipped(name: str) -> str:
    return (DATA / name).read_text()


def on_calendar(resolution: int, catchup: bool = False) -> str:
    check_resolution(resolution)
    if catchup:
        return f"*:{catchup_minute(resolution, 0):02d} UTC"
    return "*:00 UTC" if resolution == 60 else f"*:0/{resolution} UTC"


def render(home: Path, resolution: int, awty_bin: str | None = None, *,
           store: str | None = None, system_user: str | None = None) -> dict[str, str]:
    """Unit file name -> text for ``home``; ``store`` as for ``crontab.entries``.
    ``system_user``: system units whose services run as that user (``User=``); a home at
    ``SYSTEM_HOME`` is then systemd's StateDirectory (created 0700 and owned by the user)."""
    home = Path(home).expanduser().absolute()
    awty = one_line(awty_bin or default_bin(), "systemd")
    one_line(str(home), "systemd")
    if system_user is not None:
        one_line(system_user, "systemd")
    out = {}
    for name in UNITS:
        command = "catchup" if "catchup" in name else "run-slot"
        lines = []
        for line in shipped(name).splitlines():
            if line.startswith("ExecStart="):
                # systemd reads % as a specifier: a literal one is %%
                line = ("ExecStart=" + f"{awty} {command} --home {shlex.quote(str(home))}"
                        .replace("%", "%%"))
            elif line.startswith("#Environment=AWTY_HOME"):
                continue
            elif line.startswith("OnCalendar="):
                line = "OnCalendar=" + on_calendar(resolution, catchup="catchup" in name)
            lines.append(line)
            if system_user and line == "[Service]":
                lines += [f"User={system_user}", f"Group={system_user}"]
                if home == SYSTEM_HOME:
                    lines += ["StateDirectory=awty", "StateDirectoryMode=0700"]
        out[name] = (f"# Written by `awty systemd{' --system' if system_user else ''} "
                     f"--install` for {home} ({resolution}-minute slots).\n"
                     + (f"# Jobs in {store}.\n" if store else "")
                     + "\n".join(lines) + "\n")
    return out


def user_unit_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or
                                                      os.path.expanduser("~"), ".config")
    return Path(base) / "systemd" / "user"


def install(units: dict[str, str], directory: Path) -> list[Path]:
    """Write the units into ``directory``; returns the files that changed (an unchanged file
    is not rewritten)."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in units.items():
        path = directory / name
        try:
            if path.read_text() == text:
                continue
        except FileNotFoundError:
            pass
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        changed.append(path)
    return changed
