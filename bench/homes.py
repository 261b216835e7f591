"""Homes for the figures: made under the work directory, filled through the public
``add_many`` (rows and envelope files, exactly as a user's adds), and the checks that a run
on them did what it should."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from .common import SECRET_TEXT, iso


class Homes:
    def __init__(self, workdir: Path, url: str):
        self.workdir = workdir
        self.url = url
        self.n = 0

    def path(self, tag: str) -> Path:
        self.n += 1
        return self.workdir / f"home-{self.n:03d}-{tag}"

    def open(self, home: Path, now: datetime, per_host: int | None = None, **settings: str):
        """An ``Awty`` on a FixedClock, as shipped (per_host: raise its per-host cap;
        settings: e.g. a PostgreSQL ``database_url`` and ``database_schema``)."""
        from awty.api import Awty
        from awty.clock import FixedClock

        caps: dict = dict(settings)
        if per_host is not None:
            caps["per_host_concurrency"] = per_host
        return Awty(home, clock=FixedClock(now), env={"AWTY_SIGNING_SECRET": SECRET_TEXT},
                    **caps)

    def specs(self, n: int, at: Callable[[int], datetime], start: int = 0,
              url: str | None = None) -> list[dict]:
        url = url or self.url
        return [{"target": url, "at": iso(at(i)), "payload": {"order": i, "status": "placed"},
                 "entity": "order", "key": str(i)} for i in range(start, start + n)]

    def fill(self, home: Path, n: int, at: Callable[[int], datetime], *, now: datetime,
             chunk: int = 50_000, url: str | None = None, **settings: str) -> float:
        """Add ``n`` jobs through the public ``add_many`` (rows and envelope files); returns
        the seconds add_many itself took. ``url``: their target, if not the bench's receiver
        (e.g. the timing receiver)."""
        spent = 0.0
        with self.open(home, now, **settings) as a:
            a.init()
            for start in range(0, n, chunk):
                specs = self.specs(min(chunk, n - start), at, start, url)
                t0 = time.perf_counter()
                a.add_many(specs)
                spent += time.perf_counter() - t0
        return spent


def check_summary(summary: dict, n: int, what: str) -> None:
    done = summary.get("outcomes", {}).get("done", 0)
    if summary.get("ran") != n or done != n:
        raise RuntimeError(f"{what}: expected {n} callbacks done, got ran={summary.get('ran')} "
                           f"outcomes={summary.get('outcomes')}")


def catchup_summary(c) -> dict:
    d = c.to_dict()
    return {"ran": d["ran"], "outcomes": d["outcomes"]}
