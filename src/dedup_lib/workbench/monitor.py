"""The live monitor in a notebook: what the broker does to the sends as they land, per minute,
and the latest alerts, redrawn in place as each micro-batch of verdicts comes in."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd

from dedup_lib.analysis.evidence import Evidence
from dedup_lib.errors import InputError
from dedup_lib.live.output.lines import RESENDS, BatchLine
from dedup_lib.live.watch import Watch, watch_duplicates
from dedup_lib.text import escape
from dedup_lib.workbench.charts import counts_over_time
from dedup_lib.workbench.redraw import RedrawnCharts
from dedup_lib.workbench.section import Section
from dedup_lib.workbench.style import styled

if TYPE_CHECKING:
    from datetime import timedelta

    from plotly import graph_objects as go
    from pyspark.sql import SparkSession

    from dedup_lib.live.options import WatchOptions
    from dedup_lib.rules.policy import Policies
    from dedup_lib.telemetry.files import PathText

#: The alerts' columns, as the table shows them.
ALERT_COLUMNS = ["kind", "entity", "dedup_key", "send_time", "original_send_time", "why"]


class LiveMonitor:
    """Charts and a table fed by :func:`dedup_lib.watch_duplicates`, in a notebook (05).

    :meth:`start` runs the monitor, :meth:`view` is what a cell shows, :meth:`stop` ends it.
    Each micro-batch's counts are added to the minutes they belong to (late telemetry lands
    in past minutes); :meth:`counters` are the monitor's Prometheus counters.

    Parameters
    ----------
    shown : int, default 20
        How many of the latest alerts the table shows.

    Examples
    --------
    >>> import os, shutil
    >>> from dedup_lib import DedupPolicy, LiveMonitor, get_spark, sample_path
    >>> os.makedirs("landing", exist_ok=True)
    >>> _ = shutil.copy(sample_path("incident.parquet"), "landing/")
    >>> monitor = LiveMonitor()
    >>> watch = monitor.start(get_spark(), "landing", DedupPolicy("PT10M"), "PT1M",
    ...                       out="verdicts", checkpoint="ck", once=True)
    >>> import re
    >>> print(re.sub("[0-9]{2}:[0-9]{2}:[0-9]{2}", "hh:mm:ss", monitor.status.value))
    Micro-batch 0 at hh:mm:ss: 29,719 sends judged, 3,101 duplicates, 0 late, 203 alerts;
    state 1,489 keys, 5.1 MiB in memory, 88.5 KiB on disk; 153 waiting.

    The methods' examples go on with this ``monitor`` and ``watch``; :meth:`stop` ends it.
    """

    def __init__(self, shown: int = 20) -> None:
        self.shown = shown
        self.watch: Watch | None = None
        self._lock = threading.Lock()
        self._verdicts = pd.DataFrame(columns=["time", "verdict", "sends"])
        self._alerted = pd.DataFrame(columns=["time", "kind", "sends"])
        self._alerts: list[dict[str, Any]] = []
        self.charts = RedrawnCharts(self.figures())
        self.table = widgets.HTML(self._table_html())
        self.status = widgets.HTML("Not started.")
        self.note = widgets.HTML()
        self.lacks: str | None = None
        #: Whether :attr:`lacks` was said for the monitor started last.
        self._noted = False
        self.refused: str | None = None
        self._drawn = threading.Event()

    def start(
        self,
        spark: SparkSession,
        source: PathText,
        policy: Policies | None = None,
        lateness: timedelta | str = "PT1M",
        *,
        out: PathText,
        checkpoint: PathText,
        once: bool = False,
        options: WatchOptions | None = None,
        wait: float = 120,
    ) -> Watch | None:
        """Start :func:`dedup_lib.watch_duplicates` on ``source``, each micro-batch drawn here.

        Returns once the first verdicts are drawn, or after ``wait`` seconds; at once when
        nothing has landed yet (the status line says it waits for the first file). Telemetry
        the monitor cannot read (an export, not a stream) is said in the status line instead.

        Parameters
        ----------
        spark : SparkSession
            A classic or Spark Connect session.
        source : str or os.PathLike
            The landing folder.
        policy, lateness, out, checkpoint, once, options
            As :func:`dedup_lib.watch_duplicates` takes them; its ``on_batch`` is
            :meth:`update`.
        wait : float, default 120
            Seconds to wait at most for the first verdicts.

        Returns
        -------
        Watch or None
            The running monitor; None when the input cannot be watched (said in the status
            line and by :meth:`latest`).

        Raises
        ------
        MissingFileError
            ``source`` does not exist.

        Examples
        --------
        With ``monitor`` and ``watch`` from the class's example, started with ``once=True``:
        the sends that had landed were judged before ``start`` returned.

        >>> watch is monitor.watch, watch.active
        (True, False)
        >>> sum(load["read"] for load in watch.loads)
        29872
        """
        source = os.fspath(source)
        self.status.value = f"Watching {escape(source)}: waiting for the first micro-batch."
        self._drawn.clear()
        self._noted = False
        try:
            self.watch = watch_duplicates(
                spark,
                source,
                policy,
                lateness,
                out=out,
                checkpoint=checkpoint,
                once=once,
                options=options,
                on_batch=self.update,
            )
        except InputError as refused:
            self.refused = str(refused)
            self.status.value = f"Not watching: {escape(self.refused, limit=None)}"
            return None
        if self.watch.waiting:
            with self._lock:  # unless the first file's line, drawn meanwhile, said more
                if not self.watch.lines:
                    self.status.value = (
                        f"Watching {escape(source)}: nothing has landed yet; waiting for the "
                        "first file."
                    )
            return self.watch
        self._note_lacks()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and self.watch.active:
            if self._drawn.wait(timeout=0.5):
                break
        return self.watch

    def update(self, line: BatchLine) -> None:
        """Add one micro-batch's verdicts and alerts to the charts and the table, and redraw.

        :meth:`start` passes it to the monitor as ``on_batch``: it runs in the monitor's
        thread. Each minute's counts add up over micro-batches (late telemetry lands in past
        minutes).

        Parameters
        ----------
        line : BatchLine
            What one micro-batch held (:attr:`Watch.lines <dedup_lib.Watch>` keeps them).

        Examples
        --------
        With ``watch`` from the class's example: a second monitor fed the same lines shows
        the same.

        >>> replayed = LiveMonitor()
        >>> for line in watch.lines:
        ...     replayed.update(line)
        >>> replayed.alerts().equals(monitor.alerts())
        True
        """
        if not self._noted and self.watch is not None:
            self._note_lacks()  # started before the first file, which told the columns
        minutes = line.minutes.assign(accepted=lambda m: m.sends - m.duplicates - m.late)
        long = minutes.melt(
            id_vars="minute", value_vars=["accepted", "duplicates", "late"], var_name="verdict"
        ).rename(columns={"minute": "time", "value": "sends"})
        with self._lock:
            new = long[long.sends > 0].astype({"sends": "int64"})
            both = new if self._verdicts.empty else pd.concat([self._verdicts, new])
            self._verdicts = both.groupby(["time", "verdict"])["sends"].sum().reset_index()
            alerted = line.alerted.rename(columns={"minute": "time", "alerts": "sends"})
            alerted = alerted if self._alerted.empty else pd.concat([self._alerted, alerted])
            self._alerted = alerted.groupby(["time", "kind"])["sends"].sum().reset_index()
            self._alerts = (self._alerts + line.found)[-self.shown :]
            self.charts.show(self.figures())
            self.table.value = self._table_html()
            self.status.value = _said(line)
        if line.judged:
            self._drawn.set()

    def _note_lacks(self) -> None:
        """Say what the monitor's input lacks, once its columns are known."""
        assert self.watch is not None
        self._noted = True
        self.lacks = Evidence.of(self.watch.columns, self.watch.content or None).lacks(
            "content", "which duplicates were different messages (collisions)"
        )
        self.note.value = escape(self.lacks, limit=None) if self.lacks else ""

    def figures(self) -> list[go.Figure]:
        """The two charts as they stand: sends per minute by verdict, alerts per minute by kind.

        Returns
        -------
        list of plotly.graph_objects.Figure
            The verdicts' chart, then the alerts'.

        Examples
        --------
        With ``monitor`` from the class's example:

        >>> for figure in monitor.figures():
        ...     print(figure.layout.title.text)
        Sends judged per minute, by verdict
        Alerts per minute: collisions, resends, rejected sends
        """
        alerts = "Alerts per minute: collisions, resends, rejected sends"
        return [
            counts_over_time(
                self._verdicts, "verdict", title="Sends judged per minute, by verdict",
                scope="judged yet",
            ),
            counts_over_time(
                self._alerted, "kind", title=alerts, what="alerts", scope="raised yet"
            ),
        ]  # fmt: skip

    def alerts(self) -> pd.DataFrame:
        """The latest alerts (at most ``shown``), newest first.

        Returns
        -------
        pandas.DataFrame
            One row per alert:

            - ``kind``: ``collision``, ``resend`` or ``rejected``
            - ``entity``
            - ``dedup_key``
            - ``send_time``
            - ``original_send_time``
            - ``why``: in words

        Examples
        --------
        With ``monitor`` from the class's example: resends of ``notifications``,
        whose sender gives every attempt a new MessageId.

        >>> alerts = monitor.alerts()
        >>> alerts.groupby(["kind", "entity"]).size().to_dict()
        {('resend', 'notifications'): 20}
        >>> alerts.loc[0, "dedup_key"], str(alerts.loc[0, "send_time"])
        ('69183372-0b54-4c03-acf4-ac564cebac41', '2026-11-03 21:02:56.455902+00:00')
        >>> print(alerts.loc[0, "why"])
        the same content was accepted 1.491 s before (MessageId
        0a78219d-7a75-4a98-aebe-cafb429e57e1): it reached consumers again
        """
        table = pd.DataFrame(self._alerts[-self.shown :][::-1], columns=ALERT_COLUMNS)
        return table.reset_index(drop=True)

    def latest(self) -> Section:
        """The latest alerts as a notebook section, after what the input cannot say.

        Returns
        -------
        Section
            The sentence saying what the input lacks (no content columns: no collision
            alerts), if anything, then :meth:`alerts`; or why nothing is watched.

        Examples
        --------
        With ``monitor`` from the class's example (the sample has content):

        >>> latest = monitor.latest()
        >>> latest.sentences, latest.tables[0].equals(monitor.alerts())
        ([], True)
        """
        if self.refused is not None:
            return Section.of(f"Not watching: {escape(self.refused, 'markdown', limit=None)}")
        return Section.of(self.lacks, self.alerts())

    def counters(self) -> Section:
        """The monitor's counters and gauges as of now, as ``/metrics`` serves them.

        Returns
        -------
        Section
            One table, :meth:`Watch.counters <dedup_lib.Watch.counters>`'s (``metric``,
            ``labels``, ``value``); before :meth:`start`, a sentence saying so.

        Examples
        --------
        With ``monitor`` from the class's example:

        >>> table = monitor.counters().tables[0]
        >>> int(table[table["metric"] == "dedup_sends_judged_total"]["value"].sum())
        29719
        """
        if self.watch is None:
            return Section.of("Not started.")
        return Section.of(self.watch.counters())

    def _table_html(self) -> str:
        table = self.alerts()
        if table.empty:
            return "<p>No alert yet.</p>"
        return f"<h4>Latest alerts</h4>{styled(table).to_html()}"

    def view(self) -> widgets.VBox:
        """What a notebook cell shows: the status line, the charts and the latest alerts.

        Returns
        -------
        ipywidgets.VBox
            The status line, the note on what the input lacks, the charts and the alerts'
            table, each redrawn in place by :meth:`update`.

        Examples
        --------
        With ``monitor`` from the class's example:

        >>> view = monitor.view()
        >>> view.children == (monitor.status, monitor.note, monitor.charts, monitor.table)
        True
        """
        return widgets.VBox([self.status, self.note, self.charts, self.table])

    def stop(self, after: float | None = None) -> None:
        """Stop the monitor, now or after ``after`` seconds; the checkpoint keeps its place.

        A monitor started again with the same checkpoint goes on from there.

        Parameters
        ----------
        after : float, optional
            Seconds to let it run first (None: stop now).

        Raises
        ------
        BaseException
            What stopped the monitor by itself, if it failed (:meth:`Watch.wait
            <dedup_lib.Watch.wait>`).

        Examples
        --------
        With ``monitor`` from the class's example:

        >>> monitor.stop()
        >>> print(re.sub("[0-9]{2}:[0-9]{2}:[0-9]{2}", "hh:mm:ss", monitor.status.value))
        Micro-batch 0 at hh:mm:ss: 29,719 sends judged, 3,101 duplicates, 0 late, 203 alerts;
        state 1,489 keys, 5.1 MiB in memory, 88.5 KiB on disk; 153 waiting. Stopped.
        """
        if after:
            time.sleep(after)
        if self.watch is not None:
            self.watch.stop()
        self.status.value += " Stopped."


def _said(line: BatchLine) -> str:
    """The status after ``line``: its micro-batch, when, and what its line tells."""
    named = "Resends' micro-batch" if line.stream == RESENDS else "Micro-batch"
    at = time.strftime("%H:%M:%S")
    return f"{named} {line.batch} at {at}: {escape(line.said, limit=None)}."
