"""Telling someone that a cron run had failures: the ``notify_command`` setting, run through
``/bin/sh -c`` once per ``run-slot`` / ``catchup`` that ended jobs as failed or rejected
envelopes, so that MAILTO-style alerting works without cron mail.

The command gets the summary three ways: JSON on stdin (``document``), one short line as
``$1`` and ``AWTY_NOTIFY_TEXT``, and the failure count as ``AWTY_NOTIFY_FAILED``. It runs with
a deadline and its output is discarded; a command that fails or hangs is reported back, never
raised: alerting must not turn a run that fired its jobs into a failed one."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .slots import iso

if TYPE_CHECKING:
    from .api import Awty
    from .model import HistoryRow

TIMEOUT = 30.0  # seconds the command may take
MAX_LISTED = 20  # failed jobs listed in the document


@dataclass(frozen=True)
class Sent:
    command: str
    error: str | None = None  # why the command did not succeed, else None


def failures(summary: dict[str, Any]) -> int:
    """Jobs ended as failed plus envelopes rejected, for a slot (with the late slots cron's
    run fired after it) or a catch-up summary."""
    slots = summary.get("slots") or [summary]
    n: int = (summary.get("outcomes", {}).get("failed", 0)
            + sum(s.get("rejected", 0) for s in slots))
    return n + sum(failures(late) for late in summary.get("late") or ())


def text(run: str, summary: dict[str, Any], home: str) -> str:
    late = summary.get("late") or []
    what = (f"slot {summary['slot']}" + (f" and {len(late)} late slot(s)" if late else "")
            if "slot" in summary else f"catchup of {len(summary.get('slots', []))} slot(s)")
    totals: dict[str, int] = {}
    for part in (summary, *late):
        for k, n in part.get("outcomes", {}).items():
            totals[k] = totals.get(k, 0) + n
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(totals.items()))
    rejected = sum(s.get("rejected", 0) for s in (summary.get("slots") or [summary, *late]))
    return (f"awty {run}: {what}: {outcomes or 'nothing ran'}"
            + (f", {rejected} rejected" if rejected else "")
            + f" (home {home}; see `awty history --failed`)")


def document(run: str, summary: dict[str, Any], home: str,
             failed: list[HistoryRow]) -> dict[str, Any]:
    """What goes on stdin: the run's summary and the latest failed jobs (HistoryRow)."""
    return {
        "event": "failures", "run": run, "home": home, "failed": failures(summary),
        "text": text(run, summary, home), "summary": summary,
        "failed_jobs": [{"id": h.id, "kind": h.kind.value, "target": h.target,
                         "entity": h.entity_name, "key": h.entity_key, "reason": h.reason,
                         "error": h.error, "ended_at": iso(h.ended_at)}
                        for h in failed[:MAX_LISTED]],
    }


def send(command: str, doc: dict[str, Any], *, env: dict[str, str] | None = None,
         timeout: float = TIMEOUT) -> Sent:
    """Run ``command`` with ``doc``; never raises for the command's own failures."""
    import json

    full_env = {**(os.environ if env is None else env), "AWTY_NOTIFY_TEXT": doc["text"],
                "AWTY_NOTIFY_FAILED": str(doc["failed"]), "AWTY_HOME": doc["home"]}
    try:
        # its own process group: on the deadline the whole pipeline goes, not only the shell
        p = subprocess.Popen(["/bin/sh", "-c", command, "awty-notify", doc["text"]],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=full_env, start_new_session=True)
    except OSError as e:
        return Sent(command, f"could not start: {e.strerror or e}")
    try:
        _, err = p.communicate(json.dumps(doc, default=str).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return Sent(command, f"did not finish within {timeout:g}s (killed)")
    if p.returncode != 0:
        last = (err or b"").decode("utf-8", "replace").strip().splitlines()[-1:]
        return Sent(command, f"exited {p.returncode}" + (f": {last[0]}" if last else ""))
    return Sent(command)


def after_run(awty: Awty, run: str, summary: dict[str, Any], started: datetime) -> Sent | None:
    """Notify for one finished run of ``awty`` (an ``Awty``) when it had failures and a
    ``notify_command`` is set; None when there was nothing to do."""
    command = awty.settings.notify_command
    if not command or summary.get("dry_run") or not failures(summary):
        return None
    failed = awty.history(outcome="failed", since=started, limit=MAX_LISTED)
    return send(command, document(run, summary, str(awty.home), failed), env=awty.env)
