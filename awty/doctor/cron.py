"""Is the runner scheduled, and does it run? Doctor's findings from ``awty.cronhealth``: the
scheduler (crontab line or systemd user timer), the cron daemon behind a crontab, and whether
the last slot fired on time."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import cronhealth
from .base import Ctx, Finding


def finding(check: str, h: cronhealth.Health) -> Finding:
    """A warning passes (doctor exits 0) but is shown as one."""
    return Finding(check, h.ok, h.detail, warning=h.level == "warning", summary=h.summary)


def check_cron(home: Path, resolution: int | None, *, env: dict[str, str] | None = None,
               which: Callable[[str], str | None] = shutil.which,
               run: Callable[..., subprocess.CompletedProcess[Any]] = subprocess.run,
               proc: Path | None = Path("/proc")) -> list[Finding]:
    """The scheduler and, when it is cron, the daemon that reads the crontab (``proc``: the
    /proc root to look for it in; None skips the daemon check)."""
    h = cronhealth.scheduler(home, resolution, env=env, which=which, run=run)
    out = [finding("cron", h)]
    if h.via == "cron" and h.ok and proc is not None:
        out.append(finding("cron daemon", cronhealth.cron_daemon(proc)))
    return out


def check_last_slot(ctx: Ctx) -> Finding:
    """Did the newest slot that ran start on time? (Work left in past slots is the
    ``catch-up`` check's finding: not repeated here, only pointed to.)"""
    catch_up = next((f for f in ctx.report.findings if f.check == "catch-up"), None)
    h = cronhealth.last_slot(ctx.now, ctx.a.settings.resolution, pending=[],
                             last_fired=ctx.store.last_fired(),
                             waiting=catch_up is not None and not catch_up.ok)
    return finding("last slot", h)
