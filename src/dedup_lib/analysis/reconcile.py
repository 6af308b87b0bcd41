"""A replay checked against the broker's own state: what an export of the entity holds.

An export (Service Bus Explorer, a peek) lists the messages the broker accepted and still
holds, never the duplicates it dropped. Each kept message is matched to the send the telemetry
says it came from, and lands in exactly one category:

- **explained**: matched to a send the replay accepted;
- **contradiction**: matched only to sends the replay dropped (duplicate) or refused
  (rejected): the broker kept what the replay says it dropped;
- **unexplained**: no send of its MessageId near its enqueue time: a gap in the telemetry.

Two more views: **pairs** of kept messages under one dedup key closer than the replay's
window (the broker kept both, so its window is at most their gap, or detection is off), and
the **not kept** sends the replay accepted that the export lacks (consumed, expired or lost:
listed, not judged).

Why pairs bound the window and contradictions alone do not: a send at ``t`` is a duplicate
iff an accepted send of its key has ``anchor <= t < anchor + window`` (docs/rules.md, section
1). Two kept messages of one key were both accepted, so the broker's window is at most their gap
(the later is accepted at exactly ``anchor + window``). A contradiction's gap to the replay's
original bounds the window only if the broker accepted that original too: when it dropped it
(a longer window anchored elsewhere), the gap says nothing. With an export of every accepted
message, replaying at the shortest gap between two kept messages of one key gives the broker's
verdicts on every key it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

import pandas as pd
from pyspark.sql import functions as F

from dedup_lib.analysis.matching import (
    CATEGORIES,
    CONTRADICTION,
    EXPLAINED,
    MATCHED,
    UNEXPLAINED,
    accepted_sends,
    check,
    classify,
    covered,
    kept_rows,
    pair_and_send_counts,
    pairs,
    public,
    scoped,
    send_rows,
    tally,
    utc,
)
from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.totals import ALL_ENTITIES
from dedup_lib.columns import INTERNAL, column
from dedup_lib.errors import InputError, InputTypeError, excerpt
from dedup_lib.rules.durations import format_duration, format_window, parse_window
from dedup_lib.rules.policy import DedupPolicy
from dedup_lib.spark import to_pandas
from dedup_lib.text import shown

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: How far a kept message's enqueue time may lie from its send's expected enqueue time: the
#: clocks of client and broker differ, and telemetry may log the end of the send call.
TOLERANCE = timedelta(seconds=30)

Name = Literal["explained", "contradictions", "unexplained", "pairs", "not_kept"]


@dataclass(frozen=True)
class Reconciliation:
    """A replay against an export of what the broker kept (see :func:`reconcile`).

    Spark frames: ``explained``, ``contradictions`` and ``unexplained`` (the kept messages, by
    category, with :data:`~dedup_lib.analysis.matching.ADDED`), ``pairs`` (two kept messages of
    one key closer than the window) and ``not_kept`` (accepted sends the export lacks).
    ``agreeing_window`` is the shortest gap between two kept messages of one key when shorter
    than the replay's window (the longest window that agrees with the export), ``shortest_gap``
    the shortest gap of a contradiction whose original the broker kept too.
    """

    explained: DataFrame
    contradictions: DataFrame
    unexplained: DataFrame
    pairs: DataFrame
    not_kept: DataFrame
    policy: DedupPolicy
    tolerance: timedelta
    entity: str | None
    agreeing_window: timedelta | None
    shortest_gap: timedelta | None
    tally: Mapping[str, int] = field(repr=False)

    def counts(self) -> dict[str, int]:
        """``kept`` (= ``explained`` + ``contradictions`` + ``unexplained``), contradictions
        by the replay's verdict (``contradicted_duplicates``, ``contradicted_rejections``) and
        those whose original the broker kept (``originals_kept``), ``pairs``, ``accepted``
        sends and the ``not_kept`` among them. Counted once, by :func:`reconcile`."""
        return dict(self.tally)

    def summary(self) -> pd.DataFrame:
        """One row per category: ``category``, ``count``, ``what it means``, ``what to do``."""
        c, window = self.tally, format_window(self.policy.window)
        tolerance = format_window(self.tolerance)
        bound = (
            f"replay at {_replay_at(self.agreeing_window)}"
            if self.agreeing_window is not None
            else "check the entity's settings (az servicebus queue show)"
        )
        rows = [
            (
                "kept by the broker",
                c["kept"],
                "messages the export holds, in this entity and time range",
                "—",
            ),
            (
                EXPLAINED,
                c[EXPLAINED],
                "kept messages the replay accepted too",
                "nothing: the replay agrees",
            ),
            (
                "contradictions",
                c["contradictions"],
                f"kept messages the replay at {window} drops (duplicate) or refuses (rejected): "
                "the broker kept what the replay says it dropped",
                f"the real window is shorter or detection is off: {bound}; for rejections, "
                "check the telemetry's partition key and session id",
            ),
            (
                "unexplained (telemetry gaps)",
                c[UNEXPLAINED],
                f"kept messages with no send of their MessageId within {tolerance} of their "
                "enqueue time",
                "find the sender whose sends the telemetry lacks; if clocks differ by more, "
                "raise the tolerance (offset_s shows by how much they differ)",
            ),
            (
                "pairs inside the window",
                c["pairs"],
                f"two kept messages with one dedup key less than {window} apart: the "
                "broker kept both",
                "detection is off, or the window is at most the pair's gap: "
                + (bound if self.agreeing_window is not None else "check the settings"),
            ),
            (
                "accepted sends not kept",
                c["not_kept"],
                "sends the replay accepted that the export lacks: consumed, expired or lost",
                "nothing to judge; if the export was taken before consumers ran, they were lost",
            ),
        ]
        table = pd.DataFrame(rows, columns=["category", "count", "what it means", "what to do"])
        table["count"] = table["count"].astype("int64")
        return table

    def verdict(self) -> str:
        """The reconciliation in one paragraph of words, for a notebook or a report."""
        c, window = self.tally, format_window(self.policy.window)
        name = None if self.entity is None else shown(self.entity)
        where = "" if name is None else f" on {name}"
        subject = "The broker" if name is None else f"On {name}, the broker"
        if c["kept"] == 0:
            return (
                f"The export holds no message{where} in this time range: nothing to check "
                f"against the replay at {window}."
            )
        said: list[str] = []
        dups, refused = c["contradicted_duplicates"], c["contradicted_rejections"]
        if dups:
            said.append(self._kept_duplicates(subject, window))
        if refused:
            said.append(
                f"It kept {_n(refused, 'message')} the replay calls rejected: the telemetry's "
                "properties (partition key, session id, length) differ from what reached it."
            )
        if c["pairs"] and not dups:
            assert self.agreeing_window is not None
            said.append(
                f"It kept {_n(c['pairs'], 'pair')} of messages with one key less than {window} "
                f"apart{where}: detection is off, or its window is at most "
                f"{_at_most(self.agreeing_window)}."
            )
        if not dups and not refused and not c["pairs"]:
            said.append(
                f"Every message the broker kept{where} that the telemetry explains agrees with "
                f"the replay at {window}."
            )
        return " ".join([*said, *self._unmatched()])

    def _kept_duplicates(self, subject: str, window: str) -> str:
        """What the duplicates the broker kept say of its window."""
        dups = self.tally["contradicted_duplicates"]
        text = (
            f"{subject} kept {_n(dups, 'message')} the replay at {window} calls "
            f"{'a duplicate' if dups == 1 else 'duplicates'}"
        )
        bound = self.agreeing_window if self.agreeing_window is not None else self.shortest_gap
        if bound is not None:
            return text + f": its window is at most {_at_most(bound)}, or detection is off."
        return text + (
            ": it did not keep the originals the replay matched them with (consumed, or "
            "dropped by a window anchored elsewhere), so this export does not bound its window."
        )

    def _unmatched(self) -> list[str]:
        """Sentences on the kept messages no send explains and the accepted sends not kept."""
        said = []
        unexplained, not_kept = self.tally[UNEXPLAINED], self.tally["not_kept"]
        if unexplained:
            said.append(
                f"{_n(unexplained, 'kept message').capitalize()} "
                f"{'has' if unexplained == 1 else 'have'} no send in the telemetry within "
                f"{format_window(self.tolerance)} of "
                f"{'its' if unexplained == 1 else 'their'} enqueue time: the telemetry "
                "misses sends, or the clocks differ by more."
            )
        if not_kept:
            said.append(
                f"{_n(not_kept, 'accepted send').capitalize()} "
                f"{'is' if not_kept == 1 else 'are'} not in the export (consumed, expired "
                "or lost; not judged)."
            )
        return said

    def table(self, name: Name, limit: int = 20) -> pd.DataFrame:
        """The first ``limit`` rows of one of the frames, in time order, as a small pandas
        table for display (internal order columns left out)."""
        frames = {
            "explained": self.explained,
            "contradictions": self.contradictions,
            "unexplained": self.unexplained,
            "pairs": self.pairs,
            "not_kept": self.not_kept,
        }
        if name not in frames:
            raise InputError(f"table: expected one of {', '.join(frames)}, got {excerpt(name)}")
        frame = frames[name]
        return to_pandas(frame.orderBy("send_time").limit(limit))


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _at_most(bound: timedelta) -> str:
    """A window bound as text that stays true: rounded up from a minute on, exact below;
    none at all when two messages of one key came at the same time."""
    seconds = bound.total_seconds()
    if seconds == 0:
        return "0s (it kept two messages of one key enqueued at the same time)"
    return format_duration(seconds, "up") if seconds >= 60 else format_window(bound)


def _replay_at(bound: timedelta) -> str:
    """A window to replay at that agrees with the broker: the bound rounded down to the
    second (a window at most the bound agrees), exact below a second."""
    whole = timedelta(seconds=int(bound.total_seconds()))
    return format_window(whole if whole else bound)


def parse_tolerance(value: timedelta | int | float | str) -> timedelta:
    """A matching tolerance: anything :func:`~dedup_lib.rules.durations.parse_window` reads,
    zero allowed."""
    try:
        return parse_window(value)
    except InputError as exc:
        raise InputError("tolerance: " + str(exc).removeprefix("window: ")) from exc


def reconcile(
    result: DataFrame,
    kept: DataFrame,
    policy: DedupPolicy | None = None,
    *,
    entity: str | None = None,
    start: str | datetime | None = None,
    end: str | datetime | None = None,
    tolerance: timedelta | int | float | str = TOLERANCE,
) -> Reconciliation:
    """Check a replay against what the broker really kept.

    Matching: a kept message and a send match when entity and MessageId are equal (and the
    effective partition key, session id else partition key, where both name one) and the
    send's expected enqueue time (``scheduled_enqueue_time`` when set, else ``send_time``)
    lies within ``tolerance`` of the kept enqueue time. Kept messages, in enqueue time order
    (then ``sequence_number``), each take the earliest accepted send not yet taken: no
    accepted send explains two kept messages, and as many as possible are explained. A kept
    message left without one takes the nearest duplicate or rejected send (several may take
    the same): a contradiction. With none, it is unexplained. Rows are matched by their
    position, so the sends, the kept messages and the matches are materialized once
    (``localCheckpoint``); the frames returned read from there.

    Parameters
    ----------
    result : DataFrame
        A :func:`dedup_lib.detect_duplicates` result.
    kept : DataFrame
        The messages the broker holds: ``message_id``, ``send_time`` (the enqueue time);
        optionally ``entity``, ``partition_key``, ``session_id``,
        ``scheduled_enqueue_time``, ``sequence_number`` (an export loaded with
        ``load_telemetry(..., format="sb-explorer")``).
    policy : DedupPolicy, optional
        The policy ``result`` was replayed with, for the report's words.
    entity : str, optional
        Narrows both to one queue or topic, and names the entity of a frame without an
        ``entity`` column (an export does not say which entity it came from). Without it,
        only the sends of the entities ``kept`` holds are compared.
    start, end : str or datetime, optional
        Narrow what is reported (ISO 8601, UTC without offset), by enqueue time for kept
        messages and send time for sends; the matching itself sees every row.
    tolerance : timedelta, number of seconds or str, default 30 seconds
        How far a send's expected enqueue time may be from the kept enqueue time.

    Returns
    -------
    Reconciliation
        The matches and the rows left in each category; :meth:`Reconciliation.counts`
        (counted once, here: it runs no Spark job).

    Raises
    ------
    InputError
        ``kept`` without the columns it needs, an unknown entity, a range that does not
        read (named).

    Examples
    --------
    Replayed at one minute, the retry at 0:30 is a duplicate; the broker kept it, so its
    window is shorter:

    >>> from datetime import datetime, timezone
    >>> from dedup_lib import DedupPolicy, detect_duplicates, get_spark, reconcile
    >>> def at(minute, second=0):
    ...     return datetime(2026, 11, 3, 20, minute, second, tzinfo=timezone.utc)
    >>> spark = get_spark()
    >>> columns = "event_id long, entity string, message_id string, send_time timestamp"
    >>> sends = spark.createDataFrame(
    ...     [(1, "orders", "order-1", at(0)), (2, "orders", "order-1", at(0, 30)),
    ...      (3, "orders", "order-2", at(2))], columns)
    >>> result = detect_duplicates(sends, DedupPolicy("PT1M"))
    >>> kept = spark.createDataFrame(
    ...     [(11, "orders", "order-1", at(0, 1)), (12, "orders", "order-1", at(0, 31)),
    ...      (13, "orders", "order-2", at(2, 1))], columns)
    >>> checked = reconcile(result, kept, DedupPolicy("PT1M"), entity="orders")
    >>> checked.counts()
    {'kept': 3, 'explained': 2, 'contradictions': 1, 'unexplained': 0,
     'contradicted_duplicates': 1, 'contradicted_rejections': 0, 'originals_kept': 1,
     'pairs': 1, 'accepted': 2, 'not_kept': 0}
    """
    policy = _policy(policy)
    tol = parse_tolerance(tolerance)
    check(result, kept)
    scope = None if entity in (None, ALL_ENTITIES) else entity
    kept = utc(kept, "send_time")
    sends = scoped(result, scope, "result", "entity" in kept.columns)
    kept = scoped(kept, scope, "kept", "entity" in result.columns)
    if scope is None:
        sends = covered(sends, kept)
    sends = send_rows(sends)
    matches, classified = classify(kept_rows(kept, policy), sends, tol // timedelta(microseconds=1))
    return _reconciliation(result, sends, matches, classified, policy, tol, scope, (start, end))


def _reconciliation(
    result: DataFrame,
    sends: DataFrame,
    matches: DataFrame,
    classified: DataFrame,
    policy: DedupPolicy,
    tol: timedelta,
    scope: str | None,
    span: tuple[str | datetime | None, str | datetime | None],
) -> Reconciliation:
    """The frames of the matching, narrowed to ``span`` and counted once."""
    start, end = span
    in_range = narrow(classified, None, start, end)
    pairs_in_range = narrow(pairs(classified, policy.window_us), None, start, end)
    accepted = narrow(accepted_sends(sends, matches), None, start, end)
    not_kept = accepted.where(F.col(MATCHED).isNull()).select(*public(result.columns))

    counted, shortest_gap = tally(in_range)
    counted["pairs"], agreeing, counted["accepted"], counted["not_kept"] = pair_and_send_counts(
        pairs_in_range, accepted
    )
    visible = [c for c in classified.columns if not c.startswith(INTERNAL)]
    by_category = {
        name: in_range.where(F.col("category") == name).select(*(column(c) for c in visible))
        for name in CATEGORIES
    }
    return Reconciliation(
        explained=by_category[EXPLAINED],
        contradictions=by_category[CONTRADICTION],
        unexplained=by_category[UNEXPLAINED],
        pairs=pairs_in_range,
        not_kept=not_kept,
        policy=policy,
        tolerance=tol,
        entity=scope,
        agreeing_window=agreeing,
        shortest_gap=shortest_gap,
        tally=MappingProxyType(counted),
    )


def _policy(policy: DedupPolicy | None) -> DedupPolicy:
    if policy is None:
        return DedupPolicy()
    if not isinstance(policy, DedupPolicy):
        raise InputTypeError(
            f"reconcile: expected the DedupPolicy the result was replayed with, got "
            f"{type(policy).__name__}; with per-entity settings, reconcile one entity at a "
            "time: its own policy and entity=NAME"
        )
    return policy
