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
    'Incident postmortem: ...orders...'
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
        """The report's title, as plain text: entity, window and time range."""
        start, end = self._span
        return f"Incident postmortem: {self._where}, window {self._window}, {start} to {end} UTC"

    def heading(self) -> Section:
        """The title and the summary in words, the title also in the output's metadata (the
        headless report takes its page title from there)."""
        heading = escape(self.title, "markdown", limit=None)
        return Section(
            (f"# {heading}\n\n{self.summary()}",), metadata={"dedup_lib": {"title": self.title}}
        )

    def summary(self) -> str:
        """What reached consumers again and what was lost, and the window that would have
        caught the late resends, rounded up to one a person configures, with its losses."""
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
        """The verdicts per entity at the window, over the whole input."""
        return Section.of(self.cache.summarize(self.policy.window))

    def ground_truth(self) -> Section:
        """The resends caught and delivered again, and the messages lost, by ground truth."""
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
        """Sends and drops over the incident, the resends' delays, the ids held."""
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
        """Resends that reached consumers again, by entity and cause, and over time."""
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
        """Different messages dropped because they reused an id, by sender and id pattern."""
        lacking = self.evidence.lacks("content", "which dropped sends carried a different message")
        if lacking:
            return Section.of(lacking)
        _, _, _, groups = self._diagnosed()
        if groups.empty:
            return Section.of("No collisions: no message was lost to a reused id.")
        return Section.of(groups)

    def other_windows(self) -> Section:
        """The replayed window beside shorter and longer ones."""
        windows: list[timedelta | str] = [*OTHER_WINDOWS[:3], self.policy.window]
        windows += OTHER_WINDOWS[3:]
        sweep = self.cache.sweep(windows).drop_duplicates("window_s")
        lacking = self.evidence.lacks("ground truth", "how many of those drops were resends")
        return Section.of(sweep[[c for c in _WINDOW_COLUMNS if c in sweep]], lacking)

    def against_the_broker(self, kept: DataFrame | None) -> Section:
        """The replay checked against an export of what the broker kept (``reconcile``):
        the categories, the verdict in words, the first twenty contradictions."""
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
