"""``watch_duplicates``: the broker's verdicts on sends as they land, exactly as
:func:`dedup_lib.detect_duplicates` gives them, once the watermark has passed them.

Micro-batch by micro-batch (:mod:`dedup_lib.live.runner`): the folder's new records, each
read once (:mod:`dedup_lib.live.landing.ledger`), go through Spark in one pass that loads and keys
them; the driver judges them against the anchors it holds (:mod:`dedup_lib.live.state.judge`,
:mod:`dedup_lib.live.state.store`) and writes the verdicts. Every micro-batch costs what it carries.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

import pandas as pd

from dedup_lib.analysis.evidence import Evidence
from dedup_lib.errors import InputError
from dedup_lib.live.checkpoint import Folders, Settings
from dedup_lib.live.landing.ledger import Reading
from dedup_lib.live.output.lines import BatchLine
from dedup_lib.live.runner import Runner
from dedup_lib.live.service.metrics import Metrics
from dedup_lib.live.service.pulse import Pulse, restoring
from dedup_lib.live.state import index, judge
from dedup_lib.rules.durations import parse_window
from dedup_lib.rules.policy import DedupPolicy, Policies, check_policies
from dedup_lib.telemetry.files import PathText
from dedup_lib.telemetry.landing import open_landing

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession


#: The latest micro-batches' lines and load counts a monitor keeps: it runs for weeks, and
#: what it keeps must not grow with the micro-batches it runs.
KEPT_LINES = 100
KEPT_LOADS = 1000


@dataclass
class Watch:
    """A running (or, with ``once``, finished) live monitor, as
    :func:`dedup_lib.watch_duplicates` returns it.

    Attributes
    ----------
    lines : deque of BatchLine
        The latest micro-batches' lines (counts, state size, alerts), :data:`KEPT_LINES` at
        most.
    loads : deque of dict
        The latest micro-batches' counts of what each read: ``read``, ``valid``,
        ``quarantined``, ``skipped`` (:data:`KEPT_LOADS` at most).
    loaded : collections.Counter
        Those counts added up over every micro-batch this process ran, and
        ``micro_batches``, how many it ran.
    notes : tuple of str
        What the folder held that the monitor refuses or cannot read exactly.
    error : BaseException or None
        What stopped the monitor, raised again by :meth:`wait`.
    metrics_address : tuple of (str, int) or None
        Where ``/metrics`` is served.

    Examples
    --------
    A monitor started on a copy of the incident sample, judging a micro-batch every half
    second, until the first is committed:

    >>> import os, shutil, threading
    >>> from dedup_lib import DedupPolicy, get_spark, sample_path, watch_duplicates
    >>> os.makedirs("landing", exist_ok=True)
    >>> _ = shutil.copy(sample_path("incident.parquet"), "landing/")
    >>> committed = threading.Event()
    >>> watch = watch_duplicates(get_spark(), "landing", DedupPolicy("PT10M"), out="verdicts",
    ...                          checkpoint="ck", trigger=0.5, on_batch=lambda _: committed.set())
    >>> committed.wait(timeout=120), watch.active
    (True, True)

    The methods' examples go on with this ``watch``; :meth:`stop` ends it.
    """

    runner: Runner | None = None
    #: The columns of the sends, and those compared as content (none: no collision alerts).
    columns: list[str] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    lines: deque[BatchLine] = field(default_factory=lambda: deque(maxlen=KEPT_LINES))
    loads: deque[dict[str, int]] = field(default_factory=lambda: deque(maxlen=KEPT_LOADS))
    loaded: Counter[str] = field(default_factory=Counter)
    #: What reading the folder did that the user should know (as ``LoadedTelemetry.notes``).
    notes: tuple[str, ...] = ()
    #: Why the monitor stopped by itself, if it failed.
    error: BaseException | None = None
    on_batch: Callable[[BatchLine], None] | None = None
    #: The counters and gauges (:meth:`counters`), and where ``/metrics`` is served.
    metrics: Metrics | None = None
    metrics_address: tuple[str, int] | None = None
    #: The loop's turns, as ``/-/healthy`` and systemd's watchdog see them.
    pulse: Pulse = field(default_factory=lambda: Pulse(5.0))
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def active(self) -> bool:
        """bool: Whether micro-batches still run (False once stopped, or with ``once``)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 60) -> None:
        """Stop between two micro-batches, and stop serving ``/metrics``.

        A micro-batch in hand finishes first (waited for up to ``timeout``). A monitor
        started again with the same checkpoint goes on from there, each send judged once.

        Parameters
        ----------
        timeout : float, default 60
            Seconds to wait at most for the micro-batch in hand.

        Raises
        ------
        BaseException
            What stopped the monitor by itself, if it failed (:attr:`error`).

        Examples
        --------
        With ``watch`` from the class's example:

        >>> watch.stop()
        >>> watch.active
        False
        """
        self._stop.set()
        self.pulse.notifier.stopping()
        try:
            self.wait(timeout)
        finally:
            if self.metrics is not None:
                self.metrics.close()

    def wait(self, timeout: float | None = None) -> None:
        """Wait until the monitor stops: by :meth:`stop`, or by a failure, raised here.

        A monitor started with ``once`` has stopped when :func:`dedup_lib.watch_duplicates`
        returns: this returns at once.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (None: as long as it runs).

        Raises
        ------
        BaseException
            What stopped the monitor, if it failed (:attr:`error`).

        Examples
        --------
        With ``watch`` from the class's example, stopped: it returns at once.

        >>> watch.wait()
        >>> watch.error is None
        True
        """
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error

    def counters(self) -> pd.DataFrame:
        """The monitor's counters and gauges as of now, as ``/metrics`` serves them.

        Returns
        -------
        pandas.DataFrame
            One row per sample (histogram buckets left out):

            - ``metric``: the Prometheus name, as ``dedup_sends_judged_total``
            - ``labels``: as ``entity=orders, verdict=accepted``
            - ``value``

        Examples
        --------
        With ``watch`` from the class's example: 29,719 of the 29,872 sends are judged;
        the 153 within ``lateness`` of the latest send time wait for the watermark.

        >>> counters = watch.counters()
        >>> judged = counters[counters["metric"] == "dedup_sends_judged_total"]
        >>> int(judged["value"].sum())
        29719
        """
        if self.metrics is None:
            return pd.DataFrame(columns=["metric", "labels", "value"])
        return self.metrics.table()

    def _start(self, every: float | None) -> None:
        """Run what has landed now (``every`` None), or start a micro-batch every ``every``
        seconds in a thread of its own."""
        assert self.runner is not None
        if every is None:
            while self.runner.step() is not None or self.runner.more:
                pass
            return
        self._thread = threading.Thread(
            target=self._run, args=(every,), name="dedup-watch", daemon=True
        )
        self._thread.start()

    def _loaded(self, counts: dict[str, int]) -> None:
        self.loads.append(counts)
        self.loaded.update(counts)
        self.loaded["micro_batches"] += 1

    def _keep(self, line: BatchLine) -> None:
        self.lines.append(line)
        if self.on_batch is not None:
            self.on_batch(line)

    def _run(self, every: float) -> None:
        assert self.runner is not None
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                self.runner.step()
                self.pulse.beat()
                if not self.runner.more:
                    self._stop.wait(max(0.0, every - (time.monotonic() - started)))
        except BaseException as failure:
            self.error = self.pulse.error = failure
        finally:
            self.pulse.stopped = True


def watch_duplicates(
    spark: SparkSession,
    source: PathText,
    policy: Policies | None = None,
    lateness: timedelta | str = "PT1M",
    *,
    resend_horizon: timedelta | str = "PT1H",
    out: PathText,
    checkpoint: PathText,
    quarantine: PathText | None = None,
    alerts: PathText | None = None,
    content: Sequence[str] | str | None = None,
    format: str | None = None,
    mapping: Mapping[str, str] | None = None,
    entity: str | None = None,
    once: bool = False,
    trigger: float | str = "5 seconds",
    settle: timedelta | str = "PT5S",
    exclude: Sequence[str] = (),
    metrics: str | None = None,
    on_batch: Callable[[BatchLine], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Watch:
    """Judge the sends that land in the folder ``source``, as they land.

    Each send gets the verdict :func:`dedup_lib.detect_duplicates` gives it once the
    watermark (the latest send time seen minus ``lateness``) passes its time; a send that
    lands after that gets ``late`` (and ``missed_watermark``), never dropped. Every record
    is read once, whole: text files as they grow, Parquet and compressed files once
    finished, the OpenTelemetry Collector's rotated files as one stream (docs/rules.md,
    section 8; docs/guide/live.md).

    Parameters
    ----------
    spark : SparkSession
        A classic or Spark Connect session.
    source : str or os.PathLike
        The landing folder (read flat, hidden and bookkeeping names skipped).
    policy : DedupPolicy or Mapping[str, DedupPolicy | None], optional
        As :func:`dedup_lib.detect_duplicates` takes it.
    lateness : timedelta or str, default "PT1M"
        How far behind the latest send time a send may land and still be judged.
    resend_horizon : timedelta or str, default "PT1H"
        How far back an accepted copy of the same content makes an accepted send a resend
        that reached consumers again (an alert).
    out : str or os.PathLike
        Folder of the verdicts: Parquet, one file per micro-batch, the input's columns and
        ``verdict``, ``reason``, ``dedup_key``, ``original_send_time``,
        ``original_event_id``, ``missed_watermark``.
    checkpoint : str or os.PathLike
        Folder of the monitor's progress and state: a restart with it goes on, each send
        judged once. Started with other settings, it is refused.
    quarantine : str or os.PathLike, optional
        Folder of the rows the load refuses, with their reason (default: ``out`` +
        ``-quarantine``).
    alerts : str or os.PathLike, optional
        A file of JSON lines: one per collision (a different message, by ``content``,
        dropped as a duplicate), per resend that reached consumers again and per rejected
        send.
    content : sequence of str or str, optional
        The columns that tell one message's content from another's (default: those of
        :class:`dedup_lib.Evidence` found).
    format, mapping, entity : optional
        As :func:`dedup_lib.load_telemetry` takes them.
    once : bool, default False
        Judge what is there, then stop.
    trigger : float or str, default "5 seconds"
        Seconds between micro-batches, or ``"500 milliseconds"``.
    settle : timedelta or str, default "PT5S"
        How long a text file must stay unchanged for a last record without its newline to
        count as whole.
    exclude : sequence of str, default ()
        Glob patterns of names never read (a writer's file in progress).
    metrics : str, optional
        ``HOST:PORT`` (port 0: any free one) where the Prometheus text format is served at
        ``/metrics``, with ``/-/healthy`` and ``/-/ready``, until :meth:`Watch.stop`
        (:mod:`dedup_lib.live.service.metrics`, :mod:`dedup_lib.live.service.exposition`).
    on_batch : callable, optional
        Called with each micro-batch's line as it is committed.
    on_note : callable, optional
        Called with each note: what the folder does that the monitor refuses or cannot
        read exactly.

    Returns
    -------
    Watch
        The running monitor: :meth:`Watch.stop`, :meth:`Watch.wait`, ``loads``,
        ``notes``, :meth:`Watch.counters`.

    Raises
    ------
    InputError
        A setting that does not read, a checkpoint started with other settings, a folder
        whose files cannot be loaded as ``format`` (named).
    MissingFileError
        ``source`` does not exist.

    Examples
    --------
    >>> import os, shutil
    >>> from dedup_lib import DedupPolicy, get_spark, sample_path, watch_duplicates
    >>> os.makedirs("landing", exist_ok=True)
    >>> _ = shutil.copy(sample_path("incident.parquet"), "landing/")
    >>> watch = watch_duplicates(get_spark(), "landing", DedupPolicy("PT10M"), "PT1M",
    ...                          out="verdicts", checkpoint="ck", once=True)
    >>> watch.wait()
    >>> sum(load["read"] for load in watch.loads)
    29872
    """
    landing = open_landing(spark, os.fspath(source), format, mapping, entity=entity)
    index.compile_in_background()
    judge.compile_in_background()
    columns = landing.valid_columns().schema.names
    wanted = list(Evidence.of(columns, content).content)
    horizon = parse_window(resend_horizon) if wanted else None
    reading = Reading(landing.format, parse_window(settle).total_seconds(), exclude=tuple(exclude))
    policy = check_policies(policy if policy is not None else DedupPolicy())
    settings = Settings(policy, parse_window(lateness), horizon, wanted, reading)
    # Absolute from here on: Spark resolves a relative path against its JVM's folder, and
    # the process may change its own while the monitor runs.
    quarantine = quarantine or f"{os.fspath(out).rstrip('/')}-quarantine"
    where = os.path.abspath
    folders = Folders(
        where(out), where(checkpoint), where(quarantine), None if alerts is None else where(alerts)
    )
    every = _seconds(trigger)
    watch = Watch(columns=columns, content=wanted, notes=landing.notes, on_batch=on_batch)
    watch.pulse = Pulse(every)
    say = on_note or (lambda _: None)
    for note in watch.notes:
        say(note)
    reserved = () if isinstance(policy, DedupPolicy) else sorted(policy)
    watch.metrics = Metrics(settings.lateness.total_seconds(), every, reserved)
    watch.metrics.alive = watch.pulse.health
    if metrics is not None:
        # Served from the start: /-/ready answers 503 while the state is restored.
        watch.metrics_address = watch.metrics.serve(metrics)
    tell = (watch._keep, watch._loaded, say)
    try:
        with restoring(watch.pulse):
            watch.runner = Runner(landing, settings, folders, tell, watch.metrics)
        watch._start(None if once else every)
    except BaseException:
        watch.metrics.close()
        raise
    return watch


_TRIGGER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|seconds?)?\s*$")


def _seconds(trigger: float | str) -> float:
    """A trigger interval in seconds: a number, or ``"5 seconds"``, ``"500 milliseconds"``."""
    if not isinstance(trigger, str):
        return float(trigger)
    match = _TRIGGER.match(trigger)
    if match is None:
        raise InputError(f"trigger: expected seconds, as 5 or '5 seconds', got {trigger!r}")
    value = float(match[1])
    return value / 1000 if (match[2] or "s").startswith("m") else value
