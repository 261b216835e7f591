"""What every doctor check shares: findings, the report, a tally of one kind of problem, and
the context a check runs in (which store to read: a read-only one unless repairing)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ..api import Awty
from ..errors import AwtyError
from ..slottree.tree import SlotTree
from ..store.base import Store

TEMP_FILE_AGE = 60.0  # seconds: a younger .tmp may be a write in progress
RETIRED_AGE = 600.0  # seconds: a background rm of a slot directory takes well under this
SAMPLES = 5


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    repaired: bool | None = None  # None: not attempted; True: mended; False: repair failed
    warning: bool = False  # passes (exit 0), but says something the operator should know
    summary: str | None = None  # a warning in a few words for the closing count (else check)

    @property
    def status(self) -> str:
        if self.ok:
            return "warning" if self.warning else "ok"
        return {True: "repaired", False: "repair failed", None: "problem"}[self.repaired]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    repair: bool = False

    @property
    def ok(self) -> bool:
        """True when every check passed or was repaired."""
        return all(f.ok or f.repaired for f in self.findings)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok and not f.repaired]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.ok and f.warning]

    @property
    def repairs(self) -> list[Finding]:
        return [f for f in self.findings if f.repaired]

    def get(self, check: str) -> Finding:
        return next(f for f in self.findings if f.check == check)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "repair": self.repair,
                "findings": [f.to_dict() for f in self.findings]}


@dataclass
class Tally:
    """One kind of inconsistency across many items: a count, a few examples, repair results."""

    found: int = 0
    mended: int = 0
    samples: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def note(self, item: str) -> None:
        self.found += 1
        if len(self.samples) < SAMPLES:
            self.samples.append(item)

    def attempt(self, action: Callable[[], object], repair: bool) -> None:
        if not repair:
            return
        try:
            action()
            self.mended += 1
        except (OSError, AwtyError) as e:
            if len(self.errors) < SAMPLES:
                self.errors.append(str(e))

    def finding(self, check: str, fine: str, problem: str,
                action: tuple[str, str] | None, repair: bool) -> Finding:
        """``action``: what a repair does and did, e.g. ("writes them", "wrote")."""
        if not self.found:
            return Finding(check, True, fine)
        more = f" … and {self.found - len(self.samples)} more" if self.found > len(
            self.samples) else ""
        detail = f"{self.found} {problem}: {', '.join(self.samples)}{more}"
        if action is None:
            return Finding(check, False, detail)
        if not repair:
            return Finding(check, False, f"{detail} (`awty doctor --repair` {action[0]})")
        detail += f"; {action[1]} {self.mended} of {self.found}"
        if self.errors:
            detail += " (errors: " + "; ".join(self.errors) + ")"
        return Finding(check, False, detail, self.mended == self.found and not self.errors)


def tree_of(a: Awty) -> SlotTree:
    """The slot tree; the checks that ask for it run only for a home that has one."""
    if not isinstance(a.tree, SlotTree):
        raise AwtyError("this home keeps no slot tree (PostgreSQL store)")
    return a.tree


@dataclass
class Ctx:
    a: Awty
    repair: bool
    now: datetime
    env: dict[str, str]
    which: Callable[[str], str | None]
    run: Callable[..., subprocess.CompletedProcess[Any]]
    report: Report
    view: Awty | None = None  # read-only: never creates, migrates or chmods anything

    @property
    def tree(self) -> SlotTree:
        return tree_of(self.a)

    @property
    def store(self) -> Store:
        """The store the checks read (and, repairing, mend). Without ``repair`` it is opened
        read-only: no file is created and no schema migrated."""
        if self.repair:
            return self.a.store
        if self.view is None:
            self.view = self.a.read_only()
        return self.view.store

    def close(self) -> None:
        if self.view is not None:
            self.view.close()
            self.view = None

    def add(self, f: Finding | Iterable[Finding]) -> None:
        for one in [f] if isinstance(f, Finding) else f:
            self.report.findings.append(one)
            if one.repaired:
                self.a.logger().warning(f"doctor repaired {one.check}: {one.detail}")
