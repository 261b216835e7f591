"""Prometheus exposition of a home (``GET /metrics``, ``awty metrics``): what the store says
now (pending by slot window and kind, in flight, missed slots, the last day's outcomes and
executions, lateness, and the last day's delivery and run durations as histograms), and what
this serve process counted (jobs added, store errors, its requests' durations).

The store's histograms are gauge histograms over the last 24 hours (their buckets fall as
executions leave the window): ``histogram_quantile`` takes their buckets as they are, with no
``rate()``. They come from the executions the store records, so they cover every runner of
the home (cron's ``run-slot``, ``catchup``, ``serve --run-slots``) and read the same from
``awty metrics`` on any host."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from time import perf_counter
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest,
)
from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ..api import Awty

# a *_created sample beside each counter is noise for a scraper
disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated in prometheus_client

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# pending jobs by how far ahead their slot is (upper bounds in seconds; "past": missed)
WINDOWS = (("past", 0), ("15m", 900), ("1h", 3600), ("24h", 86400), ("later", None))
# histogram buckets (seconds): one delivery (a callback's answer, an exec job's run), one run
# of a slot, one request to serve
DELIVERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
RUN_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


def store_families(a: Awty) -> list[Metric]:
    """The store's figures as gauges (read at each scrape, from any host of the home)."""
    from ..stats import compute_with_durations

    doc, deliveries, runs = compute_with_durations(
        a, [b * 1000 for b in DELIVERY_BUCKETS], [b * 1000 for b in RUN_BUCKETS])
    now = a.clock.now()
    pending = GaugeMetricFamily("awty_pending_jobs", "Pending jobs by how far ahead their "
                                "slot is", labels=["window"])
    counts = dict.fromkeys((w for w, _ in WINDOWS), 0)
    # the slots of the next 24 hours (and past ones) from the slot index's range; the jobs
    # after them are the total (counted above) less those: not a GROUP BY over every pending
    # job at each scrape (~6 ms of SQLite's CPU a scrape for 100,000 jobs)
    near = 0
    for slot, n in a.store.slots_with_work(until=now + timedelta(seconds=WINDOWS[-2][1])):
        ahead = (slot - now).total_seconds()
        for name, top in WINDOWS:
            if top is None or ahead <= top:
                counts[name] += n
                near += n
                break
    # two reads, not one transaction: a slot filled between them is not a negative count
    counts["later"] = max(0, doc["pending"]["total"] - near)
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
    return [pending, by_kind, in_flight, missed, outcomes, fired, late,
            _histogram("awty_delivery_duration_seconds_last_day", "Each delivery's duration "
                       "(a callback's answer, an exec or python job's run) over the last 24 "
                       "hours", DELIVERY_BUCKETS, deliveries),
            _histogram("awty_run_duration_seconds_last_day", "Each slot run's duration "
                       "(run-slot, catchup, serve --run-slots: a runner's first execution in "
                       "the slot to its last) over the last 24 hours", RUN_BUCKETS, runs)]


def _histogram(name: str, doc: str, bounds: tuple[float, ...],
               got: tuple[list[int], int, float]) -> GaugeHistogramMetricFamily:
    counts, n, total_ms = got
    buckets = [(repr(b), c) for b, c in zip(bounds, counts, strict=True)]
    return GaugeHistogramMetricFamily(name, doc, buckets=[*buckets, ("+Inf", n)],
                                      gsum_value=total_ms / 1000)


def exposition(a: Awty) -> bytes:
    """The text ``awty metrics`` prints: the store's figures alone."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Once(store_families(a)))
    return generate_latest(registry)


class _Once(Collector):
    def __init__(self, families: list[Metric]) -> None:
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
        self.requests = Histogram("awty_serve_request_duration_seconds", "Each request's "
                                  "duration in this serve process (received to answered)",
                                  buckets=REQUEST_BUCKETS, registry=self.registry)

    def added(self, n: int) -> None:
        self._added.inc(n)

    def store_error(self) -> None:
        self._errors.inc()

    def text(self, families: list[Metric]) -> bytes:
        return generate_latest(self.registry) + exposition_of(families)


class Timed:
    """ASGI middleware observing each HTTP request's duration (the app returns once the
    answer is sent); no labels, so one observation a request and nothing else."""

    def __init__(self, app: Any, metrics: ServeMetrics) -> None:
        self.app, self.observe = app, metrics.requests.observe

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.observe(perf_counter() - start)


def exposition_of(families: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Once(families))
    return generate_latest(registry)
