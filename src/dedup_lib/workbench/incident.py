"""The incident postmortem (notebook 04 and the report it becomes): what was resent, dropped,
delivered twice and lost over one entity and time range, each section from the data.

:class:`Incident` replays the input once per need (a :class:`ReplayCache` for the verdicts,
charts and other windows; ``detect_duplicates`` and the content diagnostics when the input has
content) and gives each section of the report: its title and summary in words, the verdicts,
the ground truth, the charts, the resends that reached consumers again, the messages lost,
the other windows and the check against the broker's export. A section the data cannot fill
says so in one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from dedup_lib.analysis.diagnostics import (
    MISS_AFTER_WINDOW,
    collision_groups,
    collisions,
    counts_over_time,
    missed_resends,
    missed_summary,
)
from dedup_lib.analysis.evidence import Evidence
from dedup_lib.analysis.reconcile import reconcile
from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.totals import ALL_ENTITIES
from dedup_lib.replay.engine import detect_duplicates
from dedup_lib.rules.durations import format_duration, format_window
from dedup_lib.rules.policy import DedupPolicy
from dedup_lib.sweep.cache import ReplayCache
from dedup_lib.sweep.grid import SERVICE_HIGH_S, configurable_window
from dedup_lib.text import escape
from dedup_lib.workbench import charts
from dedup_lib.workbench.section import Section

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dedup_lib.analysis.selection import Frame

__all__ = ["Incident"]

#: The other windows the report compares the replayed one with.
OTHER_WINDOWS = ("PT20S", "PT1M", "PT5M", "PT1H", "P1D")
_WINDOW_COLUMNS = (
    "window_s",
    "duplicates",
    "resends_caught",
    "extra_deliveries",
    "messages_lost",
    "peak_held",
)


@dataclass
class Incident:
    """The postmortem of an incident: what was resent, dropped, delivered twice and lost
    (notebook 04 and its HTML report); each method is one section.

    The verdicts, the ground truth and the other windows cover the whole input, as the broker
    saw it; the summary, the charts over time, the missed resends, the messages lost and the
    check against the broker narrow to ``entity`` and ``start`` to ``end``.

    Parameters
    ----------
    df : DataFrame
        Loaded sends.
    policy : DedupPolicy
        The window and mode replayed.
    entity : str, default "(all)"
        One entity, or every one.
    start, end : str, optional
        The incident's span, ISO 8601 (None: the data's first and last send).
    content : str or sequence of str, optional
        The content columns (None: ``payload_hash``, if any).
    embed : bool, default False
        Write the charts with plotly.js inlined, for a report read offline.

    Examples
    --------
    >>> from dedup_lib import DedupPolicy, Incident, get_spark, load_telemetry, sample_path
    >>> sends = load_telemetry(get_spark(), sample_path("incident.parquet")).valid
    >>> incident = Incident(sends, DedupPolicy("PT10M"), entity="orders")
    >>> incident.title
    'Incident postmortem: orders, window PT10M, 2026-11-03 20:00 to 2026-11-03 22:59 UTC'
    """

    df: DataFrame
    policy: DedupPolicy
    entity: str = ALL_ENTITIES
    start: str | None = None
    end: str | None = None
    content: str | Sequence[str] | None = None
    embed: bool = False
    cache: ReplayCache = field(init=False)
    evidence: Evidence = field(init=False)
    _found: dict[str, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        carry = tuple(c for c in ("cause",) if c in self.df.columns)
        self.cache = ReplayCache.build(self.df, self.policy.partitioning, carry=carry)
        self.evidence = Evidence.of(self.df, self.content)

    # -- what the sections share -------------------------------------------------------

    def _narrow(self, table: Frame, time: str = "send_time") -> Frame:
        return narrow(table, self.entity, self.start, self.end, time=time)

    @property
    def _where(self) -> str:
        """The entity as plain text (data: escaped where it is drawn)."""
        return "all entities" if self.entity == ALL_ENTITIES else escape(self.entity, "text")

    @property
    def _span(self) -> tuple[str, str]:
        """The start and end of the incident as shown: the parameters, else the data's."""
        if "span" not in self._found:
            buckets = self._narrow(self.cache.over_time(self.policy.window), "time")["time"]
            first, last = (buckets.min(), buckets.max()) if len(buckets) else (None, None)
            shown = [
                _minute(given or seen, default)
                for given, seen, default in (
                    (self.start, first, "the start"),
                    (self.end, last, "the end"),
                )
            ]
            self._found["span"] = (shown[0], shown[1])
        span: tuple[str, str] = self._found["span"]
        return span

    @property
    def _window(self) -> str:
        return format_window(self.policy.window, "iso")

    def _result(self) -> DataFrame:
        """Every send with its verdict at the policy, replayed once for all the sections."""
        if "result" not in self._found:
            self._found["result"] = detect_duplicates(self.df, self.policy).persist()
        result: DataFrame = self._found["result"]
        return result

    def _diagnosed(self) -> tuple[DataFrame, DataFrame, pd.DataFrame, pd.DataFrame]:
        """The missed resends and collisions over the entity and range, with their tables."""
        if "diagnosed" not in self._found:
            result = self._result()
            misses = self._narrow(missed_resends(result, self.evidence.content)).persist()
            lost = self._narrow(collisions(result, self.evidence.content))
            self._found["diagnosed"] = (
                misses,
                lost,
                missed_summary(misses),
                collision_groups(lost),
            )
        found: tuple[DataFrame, DataFrame, pd.DataFrame, pd.DataFrame] = self._found["diagnosed"]
        return found

    # -- the sections ------------------------------------------------------------------

    @property
    def title(self) -> str:
        """str: The report's title in plain text, naming the entity, window and time range."""
        start, end = self._span
        return f"Incident postmortem: {self._where}, window {self._window}, {start} to {end} UTC"

    def heading(self) -> Section:
        """The report's first cell: the title as a heading, then :meth:`summary`.

        The title is also in the output's metadata: the headless report takes its page
        title from there.

        Returns
        -------
        Section
            One sentence in markdown; ``metadata["dedup_lib"]["title"]`` is :attr:`title`.

        Examples
        --------
        With ``incident`` from the class's example (this replays the input once, with the content
        diagnostics that the later sections reuse):

        >>> heading = incident.heading()
        >>> heading.metadata["dedup_lib"]["title"]
        'Incident postmortem: orders, window PT10M, 2026-11-03 20:00 to 2026-11-03 22:59 UTC'
        >>> heading.sentences[0].splitlines()[2:] == incident.summary().splitlines()
        True
        """
        heading = escape(self.title, "markdown", limit=None)
        return Section(
            (f"# {heading}\n\n{self.summary()}",), metadata={"dedup_lib": {"title": self.title}}
        )

    def summary(self) -> str:
        """What reached consumers again and what was lost over the incident, in words.

        Where resends came after the window, the window that would have caught them,
        rounded up to one a person configures, and the messages it would lose. Without
        content columns, the sentence saying the input cannot tell.

        Returns
        -------
        str
            Markdown: the entity, time range and window, the resends that reached consumers
            again, the messages lost (collisions), and what a longer window would change.

        Examples
        --------
        With ``incident`` from the class's example: at ten minutes every resend to
        ``orders`` is caught.

        >>> print(incident.summary())
        On orders from 2026-11-03 20:00 to 2026-11-03 22:59 UTC, replayed at the window
        `PT10M` (10 minutes) with partitioning disabled, **0 resends reached consumers
        again** (sends whose content had already been delivered) and **0 messages were
        lost** (dropped as duplicates of a different message that reused their id). None of
        those resends came after the window, so no longer window would have prevented
        them: they had a new MessageId, none, or another partition key.
        """
        start, end = self._span
        where = escape(self._where, "markdown", limit=None)
        words = f"`{self._window}` ({format_window(self.policy.window, 'words')})"
        opening = f"On {where} from {start} to {end} UTC, replayed at the window {words}"
        lacking = self.evidence.lacks("content", "which resends reached consumers again")
        if lacking:
            lacking = lacking[0].lower() + lacking[1:]
            return f"{opening}: {lacking} The delays chart shows resends by timing."
        _, _, missed, groups = self._diagnosed()
        again, lost = int(missed["resends"].sum()), int(groups["sends_dropped"].sum())
        said = [
            f"{opening} with partitioning {'enabled' if self.policy.partitioning else 'disabled'},"
            f" **{again:,} resends reached consumers again** (sends whose content had already"
            f" been delivered) and **{lost:,} messages were lost** (dropped as duplicates of a"
            " different message that reused their id)."
        ]
        late = missed[missed["miss_cause"] == MISS_AFTER_WINDOW]
        if late.empty:
            said.append(
                "None of those resends came after the window, so no longer window would have"
                " prevented them: they had a new MessageId, none, or another partition key."
            )
        elif late["longest_caught_from"].max() > SERVICE_HIGH_S:
            said.append(
                f"{int(late['resends'].sum()):,} came after the window, some later than the 7"
                " days Service Bus allows: no window would have prevented all of them."
            )
        else:
            better = configurable_window(late["longest_caught_from"].max())
            policy = DedupPolicy(better, partitioning=self.policy.partitioning)
            lost_then = self._narrow(collisions(detect_duplicates(self.df, policy),
                                                self.evidence.content)).count()  # fmt: skip
            said.append(
                f"{int(late['resends'].sum()):,} came after the window; a window of"
                f" `{format_window(better, 'iso')}` ({format_window(better, 'words')}) would"
                f" have prevented them, and lost {lost_then:,} messages."
            )
        return " ".join(said)

    def verdicts(self) -> Section:
        """The verdicts per entity at the policy's window, over the whole input.

        Returns
        -------
        Section
            One table, :meth:`ReplayCache.summarize`'s: a row per entity, then ``(all)``.

        Examples
        --------
        With ``incident`` from the class's example:

        >>> table = incident.verdicts().tables[0]
        >>> table.set_index("entity")["duplicates"].to_dict()
        {'notifications': 0, 'orders': 2945, 'payments': 159, '(all)': 3104}
        """
        return Section.of(self.cache.summarize(self.policy.window))

    def ground_truth(self) -> Section:
        """The resends caught and those that reached consumers again, by ground truth.

        Over the whole input, with the messages lost.

        Returns
        -------
        Section
            One sentence; without ground truth, the sentence saying the input cannot tell.

        Examples
        --------
        With ``incident`` from the class's example:

        >>> incident.ground_truth().sentences
        ['3,310 resends: 3,104 caught, 206 reached consumers again; 0 messages lost']
        """
        if not self.cache.has_ground_truth:
            return Section.of(
                self.evidence.lacks("ground truth", "which sends were resends of which message")
            )
        total = self.cache.ground_truth_summary(self.policy.window).iloc[-1]
        return Section.of(
            f"{total.resends:,} resends: {total.resends_caught:,} caught,"
            f" {total.extra_deliveries:,} reached consumers again;"
            f" {total.messages_lost:,} messages lost"
        )

    def over_time(self) -> Section:
        """Three charts of the incident: sends and duplicates, resend delays, ids held.

        Returns
        -------
        Section
            Three plotly figures over the entity and time range, with plotly.js inlined
            when ``embed``.

        Examples
        --------
        With ``incident`` from the class's example:

        >>> for figure in incident.over_time().figures:
        ...     print(figure.layout.title.text)
        Sends and dropped duplicates during the incident, window 10m
        Delay of each resend after the previous send with the same key
        Ids held in the duplicate history, window 10m
        """
        window_s = self.policy.window.total_seconds()
        start, end = self._span
        span = f"on {self._where} between {start} and {end} UTC"
        title = (
            f"Sends and dropped duplicates during the incident, window {format_duration(window_s)}"
        )
        c = self.cache
        return Section.of(
            charts.sends_over_time(
                self._narrow(c.over_time(window_s), "time"), title=title, scope=span
            ),
            charts.resend_delays(self._narrow(c.resend_delays(), "time"), window_s, scope=span),
            charts.ids_held(self._narrow(c.held_over_time(window_s), "time"), window_s, scope=span),
        ).embedded(self.embed)

    def resends_missed(self) -> Section:
        """The resends that reached consumers again, by entity and cause, and over time.

        A resend reached consumers again when the broker accepted content it had accepted
        before (:func:`dedup_lib.missed_resends`).

        Returns
        -------
        Section
            A table (``entity``, ``miss_cause``, ``resends``, ``longest_caught_from``: the
            window that would have caught them all) and a chart by cause; a sentence when
            there are none, or when the input has no content to compare.

        Examples
        --------
        With ``incident`` from the class's example:

        >>> incident.resends_missed().sentences
        ['No resend reached consumers again: no content was accepted twice.']
        """
        lacking = self.evidence.lacks("content", "which resends reached consumers again")
        if lacking:
            return Section.of(lacking)
        misses, _, missed, _ = self._diagnosed()
        if missed.empty:
            return Section.of("No resend reached consumers again: no content was accepted twice.")
        window_s = self.policy.window.total_seconds()
        start, end = self._span
        title = (
            f"Resends that reached consumers again, by cause, window {format_duration(window_s)}"
        )
        by_cause = counts_over_time(misses, "miss_cause", "PT5M")
        fig = charts.counts_over_time(
            by_cause, "miss_cause", title=title, what="resends",
            scope=f"on {self._where} between {start} and {end} UTC",
        )  # fmt: skip
        return Section.of(missed.drop(columns="median_delay"), fig).embedded(self.embed)

    def messages_lost(self) -> Section:
        """The messages lost: different messages dropped as duplicates of a reused dedup key.

        Returns
        -------
        Section
            The collisions by sender and id pattern
            (:func:`~dedup_lib.analysis.diagnostics.collision_groups`); a sentence when
            there are none, or when the input has no content to compare.

        Examples
        --------
        With ``incident`` from the class's example:

        >>> incident.messages_lost().sentences
        ['No collisions: no message was lost to a reused id.']
        """
        lacking = self.evidence.lacks("content", "which dropped sends carried a different message")
        if lacking:
            return Section.of(lacking)
        _, _, _, groups = self._diagnosed()
        if groups.empty:
            return Section.of("No collisions: no message was lost to a reused id.")
        return Section.of(groups)

    def other_windows(self) -> Section:
        """The policy's window beside 20 s, 1 min, 5 min, 1 h and 1 day, over the whole input.

        Returns
        -------
        Section
            A table, a row per window: ``window_s``, ``duplicates``, ``peak_held`` and, with
            ground truth, ``resends_caught``, ``extra_deliveries``, ``messages_lost``
            (:meth:`ReplayCache.sweep`); without it, a sentence saying what it cannot tell.

        Examples
        --------
        With ``incident`` from the class's example:

        >>> table = incident.other_windows().tables[0]
        >>> table["window_s"].tolist()
        [20.0, 60.0, 300.0, 600.0, 3600.0, 86400.0]
        >>> table["extra_deliveries"].tolist()
        [603, 579, 206, 206, 206, 206]
        """
        windows: list[timedelta | str] = [*OTHER_WINDOWS[:3], self.policy.window]
        windows += OTHER_WINDOWS[3:]
        sweep = self.cache.sweep(windows).drop_duplicates("window_s")
        lacking = self.evidence.lacks("ground truth", "how many of those drops were resends")
        return Section.of(sweep[[c for c in _WINDOW_COLUMNS if c in sweep]], lacking)

    def against_the_broker(self, kept: DataFrame | None) -> Section:
        """The replay checked against an export of what the broker kept.

        :func:`dedup_lib.reconcile` over the entity and time range: which window and
        detection setting the broker's behaviour agrees with.

        Parameters
        ----------
        kept : DataFrame or None
            The broker's accepted messages, loaded (an export such as the sample's
            ``incident-kept``, ``format="sb-explorer"``); None: there is no export.

        Returns
        -------
        Section
            The counts per category (a table), the verdict in words and the first twenty
            contradictions (a table, if any); without ``kept``, a sentence saying so.

        Raises
        ------
        InputError
            ``kept`` without the columns reconcile needs (named).

        Examples
        --------
        With ``incident`` from the class's example, without an export (the sample's,
        checked in :func:`dedup_lib.reconcile`'s example, takes a Spark pass of its own):

        >>> print(incident.against_the_broker(None).sentences[0])
        No export of what the broker kept was given, so the replay is not checked against
        the broker.
        """
        if kept is None:
            return Section.of(
                "No export of what the broker kept was given, so the replay is not checked "
                "against the broker."
            )
        checked = reconcile(
            self._result(), kept, self.policy, entity=self.entity, start=self.start, end=self.end
        )
        contradictions = None
        if checked.counts()["contradictions"]:
            columns = [
                "entity",
                "message_id",
                "send_time",
                "replay_verdict",
                "gap_s",
                "original_kept",
            ]
            contradictions = checked.table("contradictions")[columns].head(20)
        return Section.of(
            checked.summary(),
            escape(checked.verdict(), "markdown", limit=None),
            contradictions,
        )


def _minute(time: Any, default: str) -> str:
    """A time to the minute, or ``default`` when there is none."""
    return f"{pd.Timestamp(time):%Y-%m-%d %H:%M}" if time is not None else default
