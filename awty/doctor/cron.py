"""Is the runner scheduled? ``crontab -l`` or a systemd user timer running ``awty run-slot``
for this home at every slot boundary."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import AwtyError
from .base import Finding


def check_cron(home: Path, resolution: int | None, *, env: dict[str, str] | None = None,
               which: Callable[[str], str | None] = shutil.which,
               run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Finding:
    """Does cron (``crontab -l``) or a systemd user timer run ``awty run-slot`` for ``home``,
    at every boundary of ``resolution``?"""
    from .. import crontab as cron

    env = os.environ if env is None else env
    lines, why = _crontab_lines(which, run)
    user_home = Path(env.get("HOME") or os.path.expanduser("~"))
    cron_default = user_home / ".local" / "share" / "awty"
    ours = [ln for ln in lines if cron.runs_slots(ln, home, default_home=cron_default)]
    hint = "install the lines with `awty crontab --install`"
    if ours:
        missed = cron.missed_boundaries(ours[0], resolution) if resolution else []
        if missed:
            return Finding("cron", False, f"crontab runs `awty run-slot` but not at every "
                           f"{resolution}-minute boundary (misses minute(s) "
                           f"{','.join(map(str, missed))}): {ours[0].strip()} — {hint}")
        return Finding("cron", True, f"crontab: {ours[0].strip()}")
    timers = _systemd_timers(env, user_home)
    if timers:
        return timers
    if why and which("crontab") is None:
        hint = "install cron and run `awty crontab --install`"
    return Finding("cron", False, f"{why or 'no crontab line runs `awty run-slot` for this home'}"
                   f": {hint}, or use the systemd user timers in scripts/systemd")


def _crontab_lines(which, run) -> tuple[list[str], str | None]:
    from .. import crontab as cron

    if which("crontab") is None:
        return [], "no `crontab` command on PATH"
    try:
        return cron.read(run).splitlines(), None
    except AwtyError as e:
        return [], str(e)


def _systemd_timers(env: dict[str, str] | Any, user_home: Path) -> Finding | None:
    base = Path(env.get("XDG_CONFIG_HOME") or user_home / ".config") / "systemd" / "user"
    timers = sorted(base.glob("awty-*.timer"))
    if not timers:
        return None
    names = [p.name for p in timers]
    enabled = [n for n in names if (base / "timers.target.wants" / n).exists()]
    if not enabled:
        return Finding("cron", False, f"systemd user timer(s) {', '.join(names)} in {base} are "
                       f"not enabled: systemctl --user enable --now {' '.join(names)}")
    return Finding("cron", True, f"systemd user timer(s): {', '.join(enabled)}")
