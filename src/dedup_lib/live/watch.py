"""``watch_duplicates``: the broker's verdicts on sends as they land, exactly as
:func:`dedup_lib.detect_duplicates` gives them, once the watermark has passed them.

Micro-batch by micro-batch (:mod:`dedup_lib.live.runner`): the folder's new records, each
read once (:mod:`dedup_lib.live.landing.ledger`), go through Spark in one pass that loads and keys
them; the driver judges them against the anchors it holds (:mod:`dedup_lib.live.state.judge`,
:mod:`dedup_lib.live.state.store`) and writes the verdicts. Every micro-batch costs what it carries.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING

import pandas as pd

from dedup_lib.analysis.evidence import Evidence
from dedup_lib.errors import InputError
from dedup_lib.live.checkpoint import Folders, Settings
from dedup_lib.live.executors.runner import ExecutorsRunner
from dedup_lib.live.landing.ledger import Reading
from dedup_lib.live.options import WatchOptions, WriteOptions
from dedup_lib.live.output.lines import BatchLine, Tell
from dedup_lib.live.runner import Runner
from dedup_lib.live.service.first_file import FirstFile
from dedup_lib.live.service.loop import Loop, Progress
from dedup_lib.live.service.metrics import Metrics
from dedup_lib.live.service.pulse import Pulse, restoring
from dedup_lib.live.state import index
from dedup_lib.live.state.budget import StateBudget
from dedup_lib.replay import walk
from dedup_lib.rules.durations import parse_window
from dedup_lib.rules.policy import DedupPolicy, Policies, check_policies
from dedup_lib.telemetry.files import PathText
from dedup_lib.telemetry.landing import NothingLandedError, open_landing

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dedup_lib.telemetry.landing import Landing


@dataclass(frozen=True)
class Watch:
    """A running (or, with ``once``, finished) live monitor, as
    :func:`dedup_lib.watch_duplicates` returns it: what it learns later is in its
    :class:`~dedup_lib.live.service.loop.Progress`, and, started before the first file, in
    its :class:`Found`.

    Attributes
    ----------
    runner : Runner or ExecutorsRunner or FirstFile
        Its micro-batches (:mod:`dedup_lib.live.runner`, or
        :mod:`dedup_lib.live.executors.runner` with the state on the executors), or, started
        on a folder where nothing has landed, the wait for the first file
        (:mod:`dedup_lib.live.service.first_file`).
    found : Found
        What the first file told: :attr:`columns`, :attr:`content`, :attr:`notes`.
    metrics : Metrics
        The counters and gauges (:meth:`counters`).
    metrics_address : tuple of (str, int) or None
        Where ``/metrics`` is served.
    pulse : Pulse
        The loop's turns, as ``/-/healthy`` and systemd's watchdog see them.
    progress : Progress
        The micro-batches' lines and loads, and what stopped the monitor; read as
        :attr:`lines`, :attr:`loads`, :attr:`loaded`, :attr:`error`.
    loop : Loop or None
        The thread running the micro-batches (None with ``once``).

    Examples
    --------
    A monitor started on a copy of the incident sample, judging a micro-batch every half
    second, until the first is committed:

    >>> import os, shutil, threading
    >>> from dedup_lib import DedupPolicy, ReadOptions, WatchOptions, get_spark, sample_path
    >>> from dedup_lib import watch_duplicates
    >>> os.makedirs("landing", exist_ok=True)
    >>> _ = shutil.copy(sample_path("incident.parquet"), "landing/")
    >>> committed = threading.Event()
    >>> watch = watch_duplicates(get_spark(), "landing", DedupPolicy("PT10M"), out="verdicts",
    ...                          checkpoint="ck", on_batch=lambda _: committed.set(),
    ...                          options=WatchOptions(reading=ReadOptions(trigger=0.5)))
    >>> committed.wait(timeout=120), watch.active
    (True, True)

    The methods' examples go on with this ``watch``; :meth:`stop` ends it.
    """

    runner: Runner | ExecutorsRunner | FirstFile
    found: Found
    metrics: Metrics
    metrics_address: tuple[str, int] | None
    pulse: Pulse
    progress: Progress
    loop: Loop | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """tuple of str: The columns of the sends (none before the first file lands)."""
        return self.found.columns

    @property
    def content(self) -> tuple[str, ...]:
        """tuple of str: Those compared as content (none: no collision alerts)."""
        return self.found.content

    @property
    def notes(self) -> tuple[str, ...]:
        """tuple of str: What the folder held that the monitor refuses or cannot read
        exactly, when it started."""
        return self.found.notes

    @property
    def waiting(self) -> bool:
        """bool: Whether the monitor waits for the first file to land in its folder."""
        return isinstance(self.runner, FirstFile) and self.runner.waiting

    @property
    def lines(self) -> deque[BatchLine]:
        """deque of BatchLine: The latest micro-batches' lines (:attr:`Progress.lines`)."""
        return self.progress.lines

    @property
    def loads(self) -> deque[dict[str, int]]:
        """deque of dict: The latest micro-batches' load counts (:attr:`Progress.loads`)."""
        return self.progress.loads

    @property
    def loaded(self) -> Counter[str]:
        """collections.Counter: The load counts added up, and ``micro_batches``."""
        return self.progress.loaded

    @property
    def error(self) -> BaseException | None:
        """BaseException or None: What stopped the monitor by itself, raised by :meth:`wait`."""
        return self.progress.error

    @property
    def active(self) -> bool:
        """bool: Whether micro-batches still run (False once stopped, or with ``once``)."""
        return self.loop is not None and self.loop.thread.is_alive()

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
        if self.loop is not None:
            self.loop.stopping.set()
        self.pulse.notifier.stopping()
        try:
            self.wait(timeout)
        finally:
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
        if self.loop is not None:
            self.loop.thread.join(timeout)
        if self.error is not None:
            raise self.error

    @property
    def refused(self) -> str | None:
        """str or None: Why a micro-batch was refused for the driver's state's memory budget
        (nothing more is judged then), if one was."""
        return self.runner.refused

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
        return self.metrics.table()


def watch_duplicates(
    spark: SparkSession,
    source: PathText,
    policy: Policies | None = None,
    lateness: timedelta | str = "PT1M",
    *,
    out: PathText,
    checkpoint: PathText,
    once: bool = False,
    options: WatchOptions | None = None,
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
        As :func:`dedup_lib.detect_duplicates` takes it (None: ``DedupPolicy()``).
    lateness : timedelta or str, default "PT1M"
        How far behind the latest send time a send may land and still be judged.
    out : str or os.PathLike
        Folder of the verdicts: Parquet, one file per micro-batch, the input's columns and
        ``verdict``, ``reason``, ``dedup_key``, ``original_send_time``,
        ``original_event_id``, ``missed_watermark``.
    checkpoint : str or os.PathLike
        Folder of the monitor's progress and state: a restart with it goes on, each send
        judged once. Started with other settings, it is refused.
    once : bool, default False
        Judge what is there, then stop; otherwise a micro-batch every
        ``options.reading.trigger`` in a thread of its own, until :meth:`Watch.stop`.
    options : WatchOptions, optional
        The rest, by concern (None: every default): how the folder is read
        (:class:`~dedup_lib.ReadOptions`: ``format``, ``mapping``, ``entity``, ``trigger``,
        ``settle``, ``exclude``), the content compared and the resend horizon
        (:class:`~dedup_lib.JudgeOptions`), the quarantine folder and the alerts file
        (:class:`~dedup_lib.WriteOptions`), the metrics' address
        (:class:`~dedup_lib.ServeOptions`), where the state is kept
        (:class:`~dedup_lib.StateOptions`).
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
    The incident sample judged once, its rejected sends appended to an alerts file:

    >>> import os, shutil
    >>> from dedup_lib import DedupPolicy, WatchOptions, WriteOptions, get_spark, sample_path
    >>> from dedup_lib import watch_duplicates
    >>> os.makedirs("landing", exist_ok=True)
    >>> _ = shutil.copy(sample_path("incident.parquet"), "landing/")
    >>> options = WatchOptions(writing=WriteOptions(alerts="alerts.jsonl"))
    >>> watch = watch_duplicates(get_spark(), "landing", DedupPolicy("PT10M"), "PT1M",
    ...                          out="verdicts", checkpoint="ck", once=True, options=options)
    >>> watch.wait()
    >>> sum(load["read"] for load in watch.loads)
    29872
    >>> with open("alerts.jsonl") as alerts:
    ...     len(alerts.readlines())
    203
    """
    options = options if options is not None else WatchOptions()
    options.check()
    policy = check_policies(policy if policy is not None else DedupPolicy())
    every = _seconds(options.reading.trigger)
    # Every setting read now, not when a first file lands in a folder still empty.
    late, horizon = parse_window(lateness), parse_window(options.judging.resend_horizon)
    settle = parse_window(options.reading.settle).total_seconds()
    pulse, progress, found = Pulse(every), Progress(on_batch), Found()
    reserved = () if isinstance(policy, DedupPolicy) else sorted(policy)
    metrics = Metrics(late.total_seconds(), every, reserved)
    metrics.alive = pulse.health
    say = on_note or (lambda _: None)
    folders = _folders(out, checkpoint, options.writing)
    start = _Start(spark, os.fspath(source), policy, late, horizon, settle, folders, options, once)
    # Served from the start: /-/ready answers 503 while the state is restored.
    served = options.serving.metrics
    address = metrics.serve(served) if served is not None else None
    try:
        tell = (progress.committed, progress.read, say)
        parts = (tell, metrics, pulse, found)
        started = start(*parts)
        runner = started or FirstFile(partial(start, *parts), metrics, pulse.notifier, start.path)
        loop = None if once else Loop(runner, pulse, progress, every)
        if loop is None:
            assert started is not None  # run once, an empty folder is refused
            _run_once(started)
        watch = Watch(runner, found, metrics, address, pulse, progress, loop)
        if loop is not None:
            loop.thread.start()
    except BaseException:
        metrics.close()
        raise
    return watch


@dataclass
class Found:
    """What the first file told the monitor: the sends' ``columns``, those compared as
    ``content``, the folder's ``notes`` when it started."""

    columns: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Start:
    """The monitor's runner, started once a file has landed in ``path``: the landing opened,
    the settings it makes, the state restored."""

    spark: SparkSession
    path: str
    policy: Policies
    #: The lateness, the resend horizon and the settle time (seconds), read at the start.
    lateness: timedelta
    horizon: timedelta
    settle: float
    folders: Folders
    options: WatchOptions
    once: bool

    def __call__(
        self, tell: Tell, metrics: Metrics, pulse: Pulse, found: Found
    ) -> Runner | ExecutorsRunner | None:
        """The runner, its state restored; None while nothing has landed (``once``: raised)."""
        reading, judging = self.options.reading, self.options.judging
        try:
            landing = open_landing(
                self.spark, self.path, reading.format, reading.mapping, entity=reading.entity
            )
        except NothingLandedError:
            if self.once:
                raise
            return None
        index.compile_in_background()
        walk.compile_in_background()
        columns = landing.valid_columns().schema.names
        wanted = list(Evidence.of(columns, judging.content).content)
        read = Reading(landing.format, self.settle, exclude=tuple(reading.exclude))
        horizon = self.horizon if wanted else None
        settings = Settings(
            self.policy, self.lateness, horizon, wanted, read, self.options.state.mode
        )
        _, _, say = tell
        for note in landing.notes:
            say(note)
        memory = self.options.state.memory
        metrics.restoring = True
        with restoring(pulse):
            budget = StateBudget(memory) if memory else StateBudget()
            runner = _runner(
                self.spark, landing, settings, self.folders, tell, metrics, budget, self.once
            )
        found.columns, found.content, found.notes = tuple(columns), tuple(wanted), landing.notes
        return runner


def _run_once(runner: Runner | ExecutorsRunner) -> None:
    """Every micro-batch the folder holds now, judged and written, then the runner stopped;
    a failure of the stop's own is raised unless a step's came first (that one is)."""
    try:
        while runner.step() is not None or runner.more:
            pass
        runner.settle()
    except BaseException:
        with contextlib.suppress(Exception):
            runner.stop()
        raise
    runner.stop()


def _runner(
    spark: SparkSession,
    landing: Landing,
    settings: Settings,
    folders: Folders,
    tell: Tell,
    metrics: Metrics,
    budget: StateBudget,
    once: bool,
) -> Runner | ExecutorsRunner:
    """The micro-batches' runner of the state's mode, its state restored, the driver's within
    ``budget``. Run once, the
    executors' query looks for its next file every tenth of a second: it ends when nothing is
    left, and at ``every`` it would wait that long for each plan and again for the timers."""
    if settings.state == "executors":
        every = ONCE_TRIGGER_MS if once else metrics.every * 1000
        trigger = f"{every:g} milliseconds"
        return ExecutorsRunner(spark, landing, settings, folders, tell, trigger, metrics)
    return Runner(landing, settings, folders, tell, metrics, budget)


def _folders(out: PathText, checkpoint: PathText, writing: WriteOptions) -> Folders:
    """The monitor's folders, absolute: Spark resolves a relative path against its JVM's
    folder, and the process may change its own while the monitor runs."""
    where = os.path.abspath
    quarantine = writing.quarantine or f"{os.fspath(out).rstrip('/')}-quarantine"
    alerts = None if writing.alerts is None else where(writing.alerts)
    return Folders(where(out), where(checkpoint), where(quarantine), alerts)


#: The executors' query's trigger, run once: short, so the run ends soon after its work.
ONCE_TRIGGER_MS = 100

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
