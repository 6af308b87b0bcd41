"""The monitor's counters and gauges, for Prometheus (and whatever scrapes its text format):
exposed by ``prometheus-client`` at ``/metrics`` (:mod:`dedup_lib.live.service.exposition`), in a
registry of the monitor's own, with the process's own metrics (``process_start_time_seconds``,
memory, CPU) and ``dedup_build_info``.

The counters count every micro-batch the checkpoint holds, once: they are kept in each
commit (:class:`dedup_lib.live.output.totals.Totals`) and a restart starts from them, so a
micro-batch run again after a crash is never counted twice. No ``_created`` series: a restart
changes them, which a Prometheus ingesting created timestamps reads as a counter reset.

A timestamp gauge is absent until it is known (restored from the checkpoint, or seen by this
process), never 0: an alert on its age then waits for it instead of reading 1970.

A counter series new to a scrape is served at 0 before its first counts are added (one scrape
later), so that ``increase()`` and ``rate()`` see a new entity's first micro-batch.

Labels are bounded: ``entity`` (:mod:`dedup_lib.live.output.labels`), ``verdict``, ``kind``, the
quarantine's reason category and the notes' kind; never a MessageId or anything else a sender
chooses freely.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from platform import python_version
from typing import TYPE_CHECKING

import pandas as pd
import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from dedup_lib.live.landing.ledger import NOTE_KINDS
from dedup_lib.live.output.labels import EntityLabels
from dedup_lib.live.service.exposition import Answer, Probes, serve
from dedup_lib.live.state.budget import OVER_BUDGET

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from dedup_lib.live.output.lines import StateSize
    from dedup_lib.live.output.totals import Totals
    from dedup_lib.live.state.judge import Clock

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

#: The verdicts and alert kinds a label takes.
VERDICTS = ("accepted", "duplicate", "rejected", "late")
KINDS = ("collision", "resend", "rejected")
#: A micro-batch's duration buckets (seconds): an idle trigger's to a burst's.
DURATIONS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

#: A counter's series: the counter and its labels; and as a key, its name and labels.
_Series = tuple[Counter, tuple[tuple[str, str], ...]]
_Key = tuple[str, tuple[tuple[str, str], ...]]


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


def _of(counter: Counter, **labels: str) -> _Series:
    return counter, tuple(labels.items())


class _Moments(Collector):
    """The timestamp gauges and the state's counts, each served only once known: the counts
    after the state is restored, and for the state on the executors once its checkpoint has
    counted them from its start."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        m = self.metrics
        watermark = m.watermark
        for name, doc, value in (
            ("dedup_last_scan_timestamp_seconds",
             "When this process last looked at its folder, new files or not (Unix time)",
             m.last_scan),
            ("dedup_last_micro_batch_timestamp_seconds",
             "When the last micro-batch was committed (Unix time)", m.committed_at),
            ("dedup_last_judged_timestamp_seconds",
             "When a send was last judged (Unix time)", m.judged_at),
            ("dedup_last_landed_timestamp_seconds",
             "When bytes last landed in the folder: its newest file's modification (Unix time)",
             m.last_landed),
            ("dedup_watermark_seconds", "The watermark (Unix time)", watermark),
            ("dedup_watermark_lag_seconds", "How far the watermark trails the wall clock",
             None if watermark is None else time.time() - watermark),
        ):  # fmt: skip
            if value is not None:
                yield GaugeMetricFamily(name, doc, value=value)
        if m.held is not None:  # the driver's index counts them, and the executors' judge
            keys, waiting = m.held
            yield GaugeMetricFamily("dedup_state_keys", "Keys held, each with its anchor", keys)
            yield GaugeMetricFamily(
                "dedup_waiting_sends", "Sends waiting for the watermark", waiting
            )

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return ()


class _Scrapes(Collector):
    """Collected first at each scrape: counts the scrapes, and adds the counts that waited
    for a new series to be served at 0."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.metrics._scraped()
        return iter(())

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return ()


class Metrics:
    """The counters and gauges of one monitor, in a registry of its own; ``every``, the
    seconds between its scans, which ``/-/ready`` measures against."""

    def __init__(self, lateness_s: float, every: float = 5.0, reserved: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_Scrapes(self))
        self.labels = EntityLabels(reserved)
        self.server: WSGIServer | None = None
        self.every = every
        self.watermark: float | None = None
        self.waiting_since: float | None = None
        self.last_scan: float | None = None
        self.last_landed: float | None = None
        self.restoring = True
        #: The keys held and the sends waiting, once the state is restored and when known.
        self.held: tuple[int, int] | None = None
        #: Whether the micro-batch loop lives; why not (set by the monitor that runs it).
        self.alive: Callable[[], Answer] = lambda: (True, "running")
        #: When a send was last judged and a micro-batch last committed (Unix time).
        self.judged_at: float | None = None
        self.committed_at: float | None = None
        self._lock = threading.Lock()
        self._scrapes = 0
        self._known: set[_Key] = set()
        #: The counts that wait for their series' zero to be scraped, by series: the scrape
        #: count when the first was queued, the series, their sum. As many as new series, not
        #: as micro-batches (a /metrics nobody scrapes for a day holds no more).
        self._deferred: dict[
            tuple[str, tuple[tuple[str, str], ...]], tuple[int, _Series, float]
        ] = {}
        self._define(lateness_s)
        self.registry.register(_Moments(self))
        ProcessCollector(registry=self.registry)

    def _define(self, lateness_s: float) -> None:
        r = self.registry
        self.sends = Counter(
            "dedup_sends_judged", "Sends judged, by entity and verdict (late included)",
            ["entity", "verdict"], registry=r,
        )  # fmt: skip
        self.alerts = Counter(
            "dedup_alerts", "Alerts raised, by entity and kind (collision, resend, rejected)",
            ["entity", "kind"], registry=r,
        )  # fmt: skip
        self.refused = Counter(
            "dedup_quarantined_rows", "Rows the load refused, by reason category", ["reason"],
            registry=r,
        )  # fmt: skip
        self.notes = Counter(
            "dedup_notes", "Notes said, by kind: about the folder (removed_unread, rewritten, "
            "changed_after_read: data never judged; unfinished), or a micro-batch refused "
            "(state_over_budget)", ["kind"], registry=r,
        )  # fmt: skip
        for kind in (*NOTE_KINDS, OVER_BUDGET):
            self._known.add(self._key(_of(self.notes, kind=kind)))
            self.notes.labels(kind=kind)
        self.rows = Counter("dedup_rows_read", "Rows read from the folder", registry=r)
        self.skipped = Counter("dedup_records_skipped", "Records that are not sends", registry=r)
        self.batches = Counter("dedup_micro_batches", "Micro-batches committed", registry=r)
        self.duration = Histogram(
            "dedup_micro_batch_duration_seconds", "How long each micro-batch took",
            buckets=DURATIONS, registry=r,
        )  # fmt: skip
        self.state_bytes = Gauge(
            "dedup_state_bytes", "The state's size, in memory and on disk", ["store"], registry=r
        )
        self.state_budget = Gauge(
            "dedup_state_budget_bytes",
            "The most the driver's state may take in memory (0: kept on the executors)",
            registry=r,
        )
        self.refused_sends = Gauge(
            "dedup_state_refused_sends",
            "Sends of the micro-batch refused because the state could pass its budget (0: none)",
            registry=r,
        )
        self.last_alert = Gauge(
            "dedup_last_alert_timestamp_seconds",
            "When an alert of this entity and kind was last raised (Unix time)",
            ["entity", "kind"], registry=r,
        )  # fmt: skip
        self.backlog = Gauge(
            "dedup_backlog_bytes", "Bytes landed in the folder and not read yet", registry=r
        )
        self._constants(lateness_s)

    def _constants(self, lateness_s: float) -> None:
        r = self.registry
        Gauge("dedup_lateness_seconds", "The lateness the monitor waits", registry=r).set(
            lateness_s
        )
        Gauge(
            "dedup_scan_interval_seconds", "Seconds between two looks at the folder", registry=r
        ).set(self.every)
        Gauge(
            "dedup_backlog_age_seconds",
            "How long the oldest bytes not read yet have waited (0: none wait)", registry=r,
        ).set_function(lambda: 0.0 if self.waiting_since is None else time.time() - self.waiting_since)  # fmt: skip  # noqa: E501
        Gauge(
            "dedup_ready", "1 when /-/ready answers 200: restored, and scanning", registry=r
        ).set_function(lambda: float(self.ready()[0]))
        Gauge(
            "dedup_restoring", "1 while the state is restored from the checkpoint", registry=r
        ).set_function(lambda: float(self.restoring))
        Info("dedup_build", "The monitor's version and what it runs on", registry=r).info(
            {
                "version": _version("dedup-lib"),
                "python": python_version(),
                "pyspark": _version("pyspark"),
            }
        )

    # The probes.

    def healthy(self) -> Answer:
        """``/-/healthy``: the micro-batch loop lives (it has not failed)."""
        return self.alive()

    def ready(self) -> Answer:
        """``/-/ready``: the state restored, and the folder scanned within twice ``every``."""
        if self.restoring:
            return False, "restoring the state from the checkpoint"
        if self.last_scan is None:
            return False, "the folder has not been scanned yet"
        since = time.time() - self.last_scan
        if since > 2 * self.every:
            return False, f"the folder was last scanned {since:.0f} s ago"
        return True, "ready"

    # What the monitor tells.

    def restored(self, totals: Totals, size: StateSize, watermark: int | None) -> None:
        """What a checkpoint counted before this process started (no series waits)."""
        self.judged_at, self.committed_at = totals.judged_at, totals.committed_at
        self._count(totals, defer=False)
        self._state(size, watermark)
        self.restoring = False

    def scanned(self, backlog: int, since: float | None, landed: float | None) -> None:
        """The folder looked at: what waits in it to be read, since when; when bytes last
        landed in it."""
        self.last_scan = time.time()
        self.backlog.set(backlog)
        self.waiting_since = since
        if landed is not None:
            self.last_landed = landed

    def noted(self, kind: str) -> None:
        """A note of ``kind`` said about the folder (every kind's series is served from the
        start: nothing waits)."""
        self.notes.labels(kind=kind).inc()

    def loaded(self, loads: Totals) -> None:
        """A plan's loads counted (the state on the executors counts them apart from its
        verdicts, which :meth:`committed` counts)."""
        self._count(loads, defer=self.server is not None)

    def alerted(self, raised: Totals) -> None:
        """Alerts raised apart from a micro-batch's verdicts: the resends the state on the
        executors pairs in a query of their own."""
        self._count(raised, defer=self.server is not None)

    def refusing(self, sends: int) -> None:
        """A micro-batch of ``sends`` refused: its state could pass its memory budget."""
        self.refused_sends.set(sends)

    def committed(self, counted: Totals, seconds: float, size: StateSize, clock: Clock) -> None:
        """A micro-batch committed: its counts, how long it took, the state it left."""
        self._count(counted, defer=self.server is not None)
        self.judged_at = counted.judged_at or self.judged_at
        self.committed_at = counted.committed_at
        self.duration.observe(seconds)
        self._state(size, clock.watermark)

    def _count(self, totals: Totals, defer: bool) -> None:
        """Add ``totals`` to the counters. A new entity's series start at 0, every verdict
        and kind, so that a rate over them sees its first sends."""
        for (entity, kind), at in totals.last_alert.items():
            self.last_alert.labels(entity=entity, kind=kind).set(at)
        entities = {e for e, _ in totals.sends} | {e for e, _ in totals.alerts}
        adds: list[tuple[_Series, float]] = [
            *((_of(self.sends, entity=e, verdict=v), 0) for e in entities for v in VERDICTS),
            *((_of(self.alerts, entity=e, kind=k), 0) for e in entities for k in KINDS),
        ]
        adds += [(_of(self.sends, entity=e, verdict=v), n) for (e, v), n in totals.sends.items()]
        adds += [(_of(self.alerts, entity=e, kind=k), n) for (e, k), n in totals.alerts.items()]
        adds += [(_of(self.refused, reason=r), n) for r, n in totals.refused.items()]
        adds += [(_of(self.notes, kind=k), n) for k, n in totals.notes.items()]
        self._add(adds, defer)
        self.rows.inc(totals.rows)
        self.skipped.inc(totals.skipped)
        self.batches.inc(totals.batches)

    @staticmethod
    def _key(series: _Series) -> _Key:
        counter, labels = series
        return counter._name, labels

    def _add(self, adds: list[tuple[_Series, float]], defer: bool) -> None:
        """Each series' count added; a series new to the scrapes (with ``defer``) is served
        at 0 first, and its count added after the next scrape."""
        with self._lock:
            new = {self._key(s) for s, _ in adds if self._key(s) not in self._known}
            for series, n in adds:
                counter, labels = series
                child = counter.labels(**dict(labels))
                key = self._key(series)
                if defer and (key in new or key in self._deferred):
                    if n:
                        stamp, _, waiting = self._deferred.get(key, (self._scrapes, series, 0.0))
                        self._deferred[key] = (stamp, series, waiting + n)
                elif n:
                    child.inc(n)
            self._known |= new

    def _scraped(self) -> None:
        """A scrape begins: the counts that waited since before the last one are added."""
        with self._lock:
            due = [d for d in self._deferred.values() if d[0] < self._scrapes]
            self._deferred = {k: d for k, d in self._deferred.items() if d[0] >= self._scrapes}
            self._scrapes += 1
        for _, (counter, labels), n in due:
            counter.labels(**dict(labels)).inc(n)

    def _flush(self) -> None:
        """Every count that waits added now (a reader that is not a scrape)."""
        with self._lock:
            due, self._deferred = list(self._deferred.values()), {}
        for _, (counter, labels), n in due:
            counter.labels(**dict(labels)).inc(n)

    def _state(self, size: StateSize, watermark: int | None) -> None:
        self.sized(size)
        self.watermark = None if watermark is None else watermark / 1e6

    def sized(self, size: StateSize) -> None:
        """The state's size: at each commit, and apart from them for the state on the
        executors, whose size Spark reports once a micro-batch's state is committed, after
        its verdicts are written and counted."""
        self.held = (size.keys, size.waiting) if size.known else None
        self.state_bytes.labels(store="memory").set(size.memory)
        self.state_bytes.labels(store="disk").set(size.disk)
        self.state_budget.set(size.budget)

    def serve(self, address: str) -> tuple[str, int]:
        """Serve ``/metrics``, ``/-/healthy`` and ``/-/ready`` at ``address`` (``HOST:PORT``;
        port 0: any free one); the address it listens at."""
        self.server = serve(self.registry, address, Probes(self.healthy, self.ready))
        return address.rpartition(":")[0], self.server.server_port

    def table(self) -> pd.DataFrame:
        """Each counter's and gauge's value, as ``/metrics`` has it (without the histogram's
        buckets and the process's metrics): ``metric``, ``labels``, ``value``."""
        self._flush()
        rows = [
            {
                "metric": sample.name,
                "labels": ", ".join(f"{k}={v}" for k, v in sorted(sample.labels.items())),
                "value": sample.value,
            }
            for family in self.registry.collect()
            for sample in family.samples
            if not sample.name.endswith("_bucket") and not sample.name.startswith("process_")
        ]
        return pd.DataFrame(rows, columns=["metric", "labels", "value"])

    def close(self) -> None:
        """Stop serving."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
