"""Prometheus exposition of a home (``GET /metrics``, ``awty metrics``): what the store says
now (pending by slot window and kind, in flight, missed slots, the last day's outcomes and
executions, lateness), and what this serve process counted (jobs added, store errors)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ..api import Awty

# a *_created sample beside each counter is noise for a scraper
disable_created_metrics()  # type: ignore[no-untyped-call]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# pending jobs by how far ahead their slot is (upper bounds in seconds; "past": missed)
WINDOWS = (("past", 0), ("15m", 900), ("1h", 3600), ("24h", 86400), ("later", None))


def store_families(a: Awty) -> list[GaugeMetricFamily]:
    """The store's figures as gauges (read at each scrape, from any host of the home)."""
    from ..stats import compute

    doc = compute(a, window=timedelta(days=1))
    now = a.clock.now()
    pending = GaugeMetricFamily("awty_pending_jobs", "Pending jobs by how far ahead their "
                                "slot is", labels=["window"])
    counts = dict.fromkeys((w for w, _ in WINDOWS), 0)
    for slot, n in a.slots():
        ahead = (slot - now).total_seconds()
        for name, top in WINDOWS:
            if top is None or ahead <= top:
                counts[name] += n
                break
    for name, n in counts.items():
        pending.add_metric([name], n)
    by_kind = GaugeMetricFamily("awty_pending_jobs_by_kind", "Pending jobs by kind",
                                labels=["kind"])
    for kind, n in sorted(doc["pending"]["by_kind"].items()):
        by_kind.add_metric([kind], n)
    in_flight = GaugeMetricFamily("awty_in_flight_jobs", "Jobs a runner holds now")
    in_flight.add_metric([], doc["pending"]["in_flight"])
    missed = GaugeMetricFamily("awty_missed_jobs", "Jobs in past slots (catch-up backlog)")
    missed.add_metric([], doc["pending"]["past_slots"]["jobs"])
    outcomes = GaugeMetricFamily("awty_outcomes_last_day", "Jobs that ended over the last "
                                 "24 hours, by outcome", labels=["outcome"])
    for outcome, n in sorted(doc["outcomes"].items()):
        outcomes.add_metric([outcome], n)
    fired = GaugeMetricFamily("awty_executions_last_day", "Executions (fired) over the last "
                              "24 hours, by answer", labels=["answer"])
    for answer, n in sorted(doc["executions"]["by_answer"].items()):
        fired.add_metric([answer], n)
    late = GaugeMetricFamily("awty_lateness_ms_last_day", "Lateness (slot boundary to fired) "
                             "over the last 24 hours", labels=["quantile"])
    for q, key in (("0.5", "median"), ("0.99", "p99"), ("1", "max")):
        if doc["lateness_ms"][key] is not None:
            late.add_metric([q], doc["lateness_ms"][key])
    return [pending, by_kind, in_flight, missed, outcomes, fired, late]


def exposition(a: Awty) -> bytes:
    """The text ``awty metrics`` prints: the store's figures alone."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Once(store_families(a)))
    return generate_latest(registry)


class _Once(Collector):
    def __init__(self, families: list[GaugeMetricFamily]) -> None:
        self.families = families

    def collect(self) -> Iterator[Any]:
        return iter(self.families)


class ServeMetrics:
    """What one serve process counts, beside the store's figures."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._added = Counter("awty_jobs_added", "Jobs added through this serve process",
                              registry=self.registry)
        self._errors = Counter("awty_store_errors", "Requests the store could not answer",
                               registry=self.registry)

    def added(self, n: int) -> None:
        self._added.inc(n)

    def store_error(self) -> None:
        self._errors.inc()

    def text(self, families: list[GaugeMetricFamily]) -> bytes:
        return generate_latest(self.registry) + exposition_of(families)


def exposition_of(families: list[GaugeMetricFamily]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Once(families))
    return generate_latest(registry)
