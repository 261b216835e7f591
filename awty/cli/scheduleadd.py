"""The body of ``awty schedule add`` and the schedule it shows, free of Typer: the Typer
commands (``schedule add``, ``schedule show``) and the quick path for a plain
``awty schedule add`` (``quickadd``) share them, so that adding a schedule from a script or a
provisioning loop never imports the parser it does not need (issue 32)."""

from __future__ import annotations

from pathlib import Path

from ..documents import schedule_document
from ..errors import InvalidInput
from . import render as r
from .addjob import read_payload
from .session import open_awty

TYPE_CHECKING = False  # `typing` costs each start ~3 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

    from ..model import Schedule


def run_schedule_add(name: str, target: str, *, cron: str | None = None,
                     every: str | None = None, start: str | None = None,
                     tz: str | None = None, missed: str | None = None,
                     missed_window: str | None = None, exec_: bool = False,
                     call: bool = False, payload: str | None = None,
                     entity: str | None = None, key: str | None = None,
                     header: list[str] | None = None, max_checks: int | None = None,
                     horizon: str | None = None, timeout: str | None = None,
                     max_attempts: int | None = None, misfire_grace: str | None = None,
                     as_json: bool = False, utc: bool = False,
                     home: Path | None = None) -> None:
    """``awty schedule add``'s body; the ``Awty`` it opens is closed when the command ends
    (``session.reporting_errors``)."""
    if exec_ and call:
        raise InvalidInput("--exec and --call exclude each other")
    a = open_awty(home)
    s = a.schedule(name, target, cron=cron, every=every, start=start, tz=tz, missed=missed,
                   missed_window=missed_window, kind="exec" if exec_ else
                   "python" if call else "http", payload_json=read_payload(payload),
                   entity=entity, key=key, headers=header or None, max_checks=max_checks,
                   horizon=horizon, timeout=timeout, max_attempts=max_attempts,
                   misfire_grace=misfire_grace)
    if as_json:
        show_schedule(a, s.name, utc, as_json)
        return
    # The rule in words is `schedule show`'s and `list`'s: rendering it imports cron-descriptor
    # (~80 % of what an add of a schedule imported beyond `awty add`'s; issue 32: within 1.2×
    # of `add`). Its next occurrences say what the rule means here; a new schedule has one job
    # pending, no outcome and no pause, so the store is asked nothing more.
    r.out(f"added schedule {s.name}")
    r.kv([("name", s.name), ("rule", _rule_text(s)), ("zone", s.zone),
          ("target", f"{s.template.kind.value} {s.template.target}"), ("missed", _missed(s)),
          ("next", _next(a.next_occurrences(s.name, 3), utc))])


def _rule_text(s: Schedule) -> str:
    return s.cron or f"every {s.every}s"


def _missed(s: Schedule) -> str:
    return s.missed + (f" (window {int(s.window)}s)" if s.missed == "all" else "")


def _next(times: list[Any], utc: bool) -> str:
    return ", ".join(r.when(t, utc, short=True) for t in times)


def show_schedule(a: Any, name: str, utc: bool, as_json: bool) -> None:
    info = a.schedule_info(name)  # raises ScheduleNotFound
    nxt = a.next_occurrences(name, 3)
    if as_json:
        r.emit_json(schedule_document(info, nxt))
        return
    s = info.schedule
    r.kv([("name", s.name), ("rule", f"{info.rule} ({_rule_text(s)})"),
          ("zone", s.zone), ("target", f"{s.template.kind.value} {s.template.target}"),
          ("missed", _missed(s)), ("next", _next(nxt, utc)), ("pending", info.pending),
          ("last", f"{info.last_outcome} {r.when(info.last_at, utc, short=True)}"
           if info.last_outcome else "-"),
          ("paused", r.when(s.paused_at, utc, short=True) if s.paused_at else "no")])
