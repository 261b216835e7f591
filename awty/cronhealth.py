"""Is anything running this home's slots? The scheduler checks ``doctor`` registers:

- ``scheduler``: a crontab line or an enabled systemd user timer (the units ``awty systemd``
  writes) runs ``awty run-slot`` for this home at every boundary. No scheduler installed at
  all (a container, a CI image) is a warning, not a failure: something else may run the
  slots. Cron installed without a line for this home, or timers not enabled, is a problem.
- ``cron_daemon``: with cron as the scheduler, a cron daemon process is running (a crontab
  nobody reads fires nothing).
- ``last_slot``: judged from the store's data, passed in: no past slot still holds work the
  scheduler should have fired (a problem), and the last slot that fired started on time (a
  warning when it did not: a catch-up fires late by design).

Every function returns a ``Health`` and never raises for what it inspects; the system is
reached only through the arguments (PATH, a /proc root, a unit directory, ``run``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .crontab import missed_boundaries, read, runs_slots
from .errors import AwtyError
from .slots import current_slot, slot_id

if TYPE_CHECKING:
    from .api import Awty

Run = Callable[..., subprocess.CompletedProcess[Any]]
# Process names of the cron daemons in use (Debian cron, cronie, busybox, dcron, fcron,
# bsd cron, systemd-cron's generator is a timer: see the timers instead).
CRON_DAEMONS = {"cron", "crond", "cronie", "fcron", "dcron", "busybox-crond", "anacron"}
GRACE = timedelta(minutes=2)  # a boundary this recent may still be running: not missed yet
LATE = timedelta(minutes=2)  # a slot's first execution later than this after it is late


@dataclass(frozen=True)
class Health:
    check: str
    level: str  # "ok", "warning" (exit 0) or "problem"
    detail: str
    via: str | None = None  # the scheduler found: "cron", "systemd" (scheduler check only)
    summary: str | None = None  # a warning in a few words, for doctor's closing count

    @property
    def ok(self) -> bool:
        """Warnings pass: what doctor's exit code follows."""
        return self.level != "problem"


# --- scheduler ------------------------------------------------------------------------------
def scheduler(home: Path, resolution: int | None, *, env: dict[str, str] | None = None,
              which: Callable[[str], str | None] | None = None, run: Run = subprocess.run,
              unit_dir: Path | None = None, systemd_run_dir: Path = Path("/run/systemd/system"),
              system_unit_dir: Path = Path("/etc/systemd/system")) -> Health:
    """Which scheduler runs ``awty run-slot`` for ``home``, if any."""
    env = dict(os.environ if env is None else env)
    which = which or (lambda name: shutil.which(name, path=env.get("PATH")))
    user_home = Path(env.get("HOME") or os.path.expanduser("~"))
    default_home = user_home / ".local" / "share" / "awty"
    found = which("crontab")
    has_cron = found is not None
    if found is not None:
        try:
            # the crontab found on this PATH, not whichever the process would find
            lines = read(lambda cmd, **kw: run([found, *cmd[1:]], **kw)).splitlines()
        except AwtyError as e:
            return Health("scheduler", "problem", f"{e}: cannot tell whether cron runs this "
                          "home", "cron")
        ours = [ln for ln in lines if runs_slots(ln, home, default_home=default_home)]
        if ours:
            missed = missed_boundaries(ours[0], resolution) if resolution else []
            if missed:
                return Health("scheduler", "problem", "crontab runs `awty run-slot` but not at "
                              f"every {resolution}-minute boundary (misses minute(s) "
                              f"{','.join(map(str, missed))}): {ours[0].strip()}: "
                              "`awty crontab --install` writes the right lines", "cron")
            return Health("scheduler", "ok", f"crontab: {ours[0].strip()}", "cron")
    timers = systemd_timers(home, default_home, unit_dir or _unit_dir(env, user_home)) or \
        systemd_timers(home, default_home, system_unit_dir, system=True)
    if timers is not None:
        return timers
    if has_cron:
        return Health("scheduler", "problem", "cron is installed but no crontab line runs "
                      "`awty run-slot` for this home: `awty crontab --install` (or `awty "
                      "systemd --install`)", "cron")
    if which("systemctl") is not None and systemd_run_dir.is_dir():
        return Health("scheduler", "problem", "no crontab command, and no awty timer in the "
                      "systemd user manager: `awty systemd --install`, then enable the timers",
                      "systemd")
    return Health("scheduler", "warning", "no scheduler installed (no crontab command, no "
                  "systemd): nothing here runs the slots; run `awty run-slot` at every "
                  "boundary from your own scheduler, or install cron and `awty crontab "
                  "--install`", summary="nothing runs the slots")


def systemd_timers(home: Path, default_home: Path, unit_dir: Path, *,
                   system: bool = False) -> Health | None:
    """The awty timers in a systemd user unit directory (``system``: the system's, as `awty
    systemd --system` writes them) whose service runs ``run-slot`` for ``home``; None when
    there are none."""
    found = []
    for timer in sorted(unit_dir.glob("awty-*.timer")):
        service = timer.with_suffix(".service")
        try:
            execs = [ln.split("=", 1)[1] for ln in service.read_text().splitlines()
                     if ln.startswith("ExecStart=")]
        except OSError:
            continue
        if any(runs_slots(e.replace("%%", "%"), home, default_home=default_home)
               for e in execs):
            found.append(timer.name)
    if not found:
        return None
    enabled = [n for n in found if (unit_dir / "timers.target.wants" / n).exists()]
    what, ctl = ("systemd system timer", "systemctl") if system else \
        ("systemd user timer", "systemctl --user")
    if not enabled:
        return Health("scheduler", "problem", f"{what} {', '.join(found)} in {unit_dir} is "
                      f"not enabled: {ctl} enable --now {' '.join(found)}", "systemd")
    return Health("scheduler", "ok", f"{what}: {', '.join(enabled)}", "systemd")


def _unit_dir(env: dict[str, str], user_home: Path) -> Path:
    return Path(env.get("XDG_CONFIG_HOME") or user_home / ".config") / "systemd" / "user"


# --- the cron daemon ------------------------------------------------------------------------
def cron_daemon(proc: Path = Path("/proc")) -> Health:
    """Is a cron daemon process running? Read from ``proc`` (each ``<pid>/comm``)."""
    if not (proc / "self").exists() and not any(proc.glob("[0-9]*")):
        return Health("cron daemon", "warning", f"cannot tell whether cron runs: no {proc}")
    for comm in proc.glob("[0-9]*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:  # the process ended meanwhile
            continue
        if name in CRON_DAEMONS:
            return Health("cron daemon", "ok", f"{name} is running (pid {comm.parent.name})")
    return Health("cron daemon", "problem", "no cron daemon is running: the crontab lines "
                  "fire nothing (start it, e.g. `systemctl enable --now cron`, or `crond` in "
                  "a container)")


# --- the last slot --------------------------------------------------------------------------
def overdue_until(now: datetime, resolution: int, grace: timedelta = GRACE) -> datetime:
    """The newest slot that should have fired by ``now``: the boundary that just passed once
    ``grace`` has gone by (before that its run may still be going), else the one before.
    Doctor's ``catch-up`` and ``last slot`` both judge "overdue" by it."""
    boundary = current_slot(now, resolution)
    return boundary if now - boundary >= grace else boundary - timedelta(minutes=resolution)


def last_slot(now: datetime, resolution: int, *, pending: list[tuple[datetime, int]],
              last_fired: tuple[datetime, datetime] | None, grace: timedelta = GRACE,
              late: timedelta = LATE, waiting: bool = False) -> Health:
    """``pending``: (slot, jobs) of slots holding work (``Awty.slots()``); ``last_fired``:
    (slot, its first execution's start) of the newest slot that ran, or None. ``waiting``:
    overdue work was already reported elsewhere (doctor's ``catch-up``, which is then not
    repeated here, nor contradicted)."""
    due = overdue_until(now, resolution, grace)
    missed = [(s, n) for s, n in pending if s <= due]
    if missed:
        jobs = sum(n for _, n in missed)
        return Health("last slot", "problem", f"{jobs} job(s) in {len(missed)} slot(s) that "
                      f"should have fired (oldest {slot_id(missed[0][0])}) still wait: the "
                      "scheduler is not running `awty run-slot` (or a run is still going); `awty "
                      "catchup` fires them")
    see = "; overdue work waits: see catch-up" if waiting else ""
    if last_fired is None:
        return Health("last slot", "ok", "no slot has fired yet"
                      + (see if waiting else ", and none is overdue"))
    slot, started = last_fired
    lag = started - slot
    if lag > late:
        # A warning: a catch-up after downtime fires late by design, and work still waiting
        # (the real harm) is a problem above. A scheduler that runs late shows here.
        return Health("last slot", "warning", f"slot {slot_id(slot)} fired "
                      f"{_span(lag)} after its boundary (a catch-up, or is the scheduler's "
                      "clock or schedule off, or the machine overloaded?)" + see,
                      summary=f"slot {slot_id(slot)} fired {_span(lag)} late")
    return Health("last slot", "ok", f"slot {slot_id(slot)} fired {_span(lag)} after its "
                  "boundary" + see)


def _span(d: timedelta) -> str:
    s = max(d.total_seconds(), 0.0)
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f} min"


def evidence(a: Awty) -> dict[str, Any]:
    """``last_slot``'s arguments from an ``Awty``: its pending slots and the newest slot in
    the execution log with that slot's first start."""
    return {"pending": a.slots(), "last_fired": a.store.last_fired()}
