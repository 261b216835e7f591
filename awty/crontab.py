"""Cron lines for a home: ``run-slot`` at every slot boundary, ``catchup`` at boot and hourly.

Every line awty writes (comments included) ends with the marker ``# awty:<home>`` so that
``install`` can find and replace its own block and leave every other line of the user's crontab
alone.

Slots are boundaries on the UTC epoch. Each resolution divides the hour, so in any zone whose
UTC offset is a whole number of hours the boundaries fall on the same minutes of local time
(``*/15``); for half- and quarter-hour zones the minutes are shifted by the offset. Daylight
saving moves clocks by whole hours, which changes nothing here.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from .clock import SystemClock
from .errors import AwtyError, InvalidInput
from .slots import check_resolution
from .storable import is_storable

Run = Callable[..., subprocess.CompletedProcess[Any]]
_NO_CRON = ("no `crontab` command: install cron (e.g. the cron or cronie package), or use the "
            "systemd user timers: `awty systemd --install`")


# --- the lines -----------------------------------------------------------------------------
def default_bin() -> str:
    """The awty being run, as a shell word: the ``awty`` console script installed next to this
    interpreter (a venv's or pipx's bin), else this Python with ``-m awty``. Not the first
    ``awty`` on PATH: that may be another install. Always absolute (cron's PATH is short)."""
    # sys.executable is not resolved: a venv's python is a symlink to the system one, whose
    # directory holds no awty (or another one).
    script = Path(sys.executable).absolute().parent / "awty"
    if script.is_file() and os.access(script, os.X_OK):
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m awty"


def local_offset_minutes(at: datetime | None = None) -> int:
    """This machine's UTC offset in minutes (what cron reads its minute fields in)."""
    # The machine's real zone offset, not awty's clock: cron reads its fields in wall time.
    off = (at or SystemClock().now()).astimezone().utcoffset()
    return int(off.total_seconds() // 60) if off else 0


def boundary_minutes(resolution: int, utc_offset_minutes: int = 0) -> list[int]:
    """Minutes of the local hour on which a UTC slot boundary falls."""
    shift = utc_offset_minutes % resolution
    return list(range(shift, 60, resolution))


def minute_field(resolution: int, utc_offset_minutes: int = 0) -> str:
    minutes = boundary_minutes(resolution, utc_offset_minutes)
    if minutes[0] != 0:
        return ",".join(map(str, minutes))
    return "*" if resolution == 1 else "0" if resolution == 60 else f"*/{resolution}"


def catchup_minute(resolution: int, utc_offset_minutes: int = 0) -> int:
    """An hourly minute that is not a boundary (for resolutions > 1), so the safety net does not
    contend with ``run-slot`` for the slot lock."""
    taken = set(boundary_minutes(resolution, utc_offset_minutes)) if resolution > 1 else set()
    minute: int = next(m for m in [*range(7, 60), *range(7)] if m not in taken)
    return minute


def marker(home: Path) -> str:
    return "# awty:" + _cron_escape(str(_absolute(home)))


def entries(home: Path, resolution: int, awty_bin: str | None = None, *,
            utc_offset_minutes: int | None = None, store: str | None = None) -> list[str]:
    """The crontab block for ``home``: comment lines, then run-slot, @reboot and hourly
    catch-up, each appending its output to ``<home>/cron.log``. Standard error is left to cron,
    which mails it (MAILTO) or logs it: awty writes there only what needs a human.
    ``awty_bin`` is shell text (default: ``default_bin()``); ``store``, a line saying where
    the jobs are when that is not the home's awty.db (PostgreSQL, and where its URL is kept)."""
    check_resolution(resolution)
    off = local_offset_minutes() if utc_offset_minutes is None else utc_offset_minutes
    home = _absolute(home)
    awty = one_line(awty_bin or default_bin(), "cron")
    tag = marker(home)
    q = shlex.quote(str(home))
    log = f">> {shlex.quote(str(home / 'cron.log'))}"

    def line(schedule: str, command: str) -> str:
        return _cron_escape(f"{schedule} {awty} {command} --home {q} {log}") + f" {tag}"

    shift = ("" if off % resolution == 0 else
             f" (shifted for this machine's UTC offset of {off:+d} min)")
    return [
        f"# awty runs this home's {resolution}-minute slots; `awty crontab --install` rewrites "
        f"the lines ending in this marker {tag}",
        f"# slots are UTC boundaries; each resolution divides the hour, so these minutes are "
        f"the same instants in local time{shift}, daylight saving included: no CRON_TZ "
        f"needed {tag}",
        *([_cron_escape(f"# jobs in {store}") + f" {tag}"] if store else []),
        line(f"{minute_field(resolution, off)} * * * *", "run-slot"),
        line("@reboot", "catchup"),
        line(f"{catchup_minute(resolution, off)} * * * *", "catchup"),
    ]


# --- installing ----------------------------------------------------------------------------
def read(run: Run = subprocess.run) -> str:
    """The user's crontab (``crontab -l``); no crontab yet is the empty string."""
    try:
        p = run(["crontab", "-l"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise AwtyError(_NO_CRON) from None
    except (OSError, subprocess.SubprocessError) as e:
        raise AwtyError(f"`crontab -l` failed: {e}") from None
    if p.returncode != 0:
        msg = (p.stderr or "").strip()
        if "no crontab" in msg.lower():
            return ""
        raise AwtyError(f"`crontab -l` failed (exit {p.returncode}): {msg or 'no message'}")
    return p.stdout or ""


def merge(current: str, block: list[str], home: Path) -> str:
    """``current`` without this home's marked lines, then ``block``. Foreign lines stay as
    they are, in order."""
    tag = marker(home)
    kept = [ln for ln in current.splitlines() if not is_ours(ln, tag)]
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join([*kept, *([""] if kept else []), *block]) + "\n"


def install(home: Path, resolution: int, awty_bin: str | None = None,
            run: Run = subprocess.run, *, utc_offset_minutes: int | None = None,
            store: str | None = None) -> tuple[str, bool]:
    """Replace this home's block in the user's crontab. Returns (the new crontab text,
    whether it changed); an unchanged crontab is not rewritten."""
    current = read(run)
    new = merge(current, entries(home, resolution, awty_bin,
                                 utc_offset_minutes=utc_offset_minutes, store=store), home)
    if new == current:
        return new, False
    try:
        p = run(["crontab", "-"], input=new, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise AwtyError(_NO_CRON) from None
    except (OSError, subprocess.SubprocessError) as e:
        raise AwtyError(f"`crontab -` failed: {e}") from None
    if p.returncode != 0:
        raise AwtyError(f"`crontab -` refused the new crontab (exit {p.returncode}): "
                        f"{(p.stderr or '').strip() or 'no message'}")
    return new, True


def is_ours(line: str, tag: str) -> bool:
    """Every line awty writes ends with the marker; matching only the end keeps ``/srv/a``
    from claiming the lines of ``/srv/a b``."""
    s = line.strip()
    return s == tag or s.endswith(" " + tag)


# --- reading other people's lines (doctor) -------------------------------------------------
def runs_slots(line: str, home: Path, *, default_home: Path | None = None) -> bool:
    """Does this crontab line run ``awty run-slot`` for ``home``? A line without ``--home``
    or ``AWTY_HOME`` counts only when ``home`` is cron's default home (``default_home``)."""
    s = line.strip()
    if not s or s.startswith("#") or "awty" not in s or "run-slot" not in s:
        return False
    words = _words(s)
    h = str(_absolute(home))
    wanted = {h, h + "/", f"AWTY_HOME={h}", f"--home={h}"}
    if wanted & set(words):
        return True
    named = any(w == "--home" or w.startswith(("--home=", "AWTY_HOME=")) for w in words)
    return not named and default_home is not None and _absolute(default_home) == _absolute(home)


def missed_boundaries(line: str, resolution: int, utc_offset_minutes: int | None = None
                      ) -> list[int] | None:
    """Local minutes holding a slot boundary on which this line does not fire; [] when it
    fires at every boundary, None when the schedule cannot be read (then nobody complains)."""
    s = line.strip()
    off = local_offset_minutes() if utc_offset_minutes is None else utc_offset_minutes
    want = boundary_minutes(resolution, off)
    if s.startswith("@"):
        word = s.split(None, 1)[0]
        return [m for m in want if m != 0] if word == "@hourly" else want
    fields = s.split(None, 5)
    if len(fields) < 6:
        return None
    if any(f != "*" for f in fields[1:5]):
        return want  # not every hour of every day: some boundaries wait for catch-up
    minutes = _minutes(fields[0])
    if minutes is None:
        return None
    return [m for m in want if m not in minutes]


def _minutes(field: str) -> set[int] | None:
    out: set[int] = set()
    try:
        for part in field.split(","):
            rng, slash, step = part.partition("/")
            every = int(step) if slash else 1
            if rng == "*":
                lo, hi = 0, 59
            elif "-" in rng:
                lo, hi = (int(x) for x in rng.split("-", 1))
            else:
                lo = int(rng)
                hi = 59 if slash else lo
            if every < 1:
                return None
            out.update(range(lo, hi + 1, every))
    except ValueError:
        return None
    return out


def _words(s: str) -> list[str]:
    try:
        return shlex.split(s.replace("\\%", "%"), comments=True)
    except ValueError:
        return s.split()


def _absolute(home: Path) -> Path:
    return Path(home).expanduser().absolute()


def _cron_escape(text: str) -> str:
    """cron turns an unescaped ``%`` into a newline; a newline would end the line."""
    return one_line(text, "cron").replace("%", "\\%")


def one_line(text: str, where: str) -> str:
    """``text`` (a path, the awty command) as a line of a crontab or unit file may hold it: a
    newline would end the line, and undecodable bytes (surrogateescape) cannot be written to a
    text file."""
    if "\n" in text or "\r" in text:
        raise InvalidInput(f"a path or command for {where} cannot contain a newline")
    if not is_storable(text):
        raise InvalidInput(f"a path or command for {where} must be UTF-8 text: {text!r}")
    return text
