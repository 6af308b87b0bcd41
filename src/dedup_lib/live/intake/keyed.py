"""Each send of a micro-batch keyed in Spark, as the batch replay keys it: the rules decided in
Spark SQL (:func:`dedup_lib.replay.sql_rules.sql_rules`), the dedup key and its hash,
the send's time and window in microseconds, and its content. The monitor's own columns are
named here, once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.analysis.diagnostics import content_key
from dedup_lib.columns import (
    C0,
    C1,
    DECIDED,
    K0,
    K1,
    KEYED_CONTENT,
    MIXED_BATCH,
    SEND_MICROS,
    WINDOW,
    column,
)
from dedup_lib.replay.sql_rules import entity_window, sql_rules, text, window_us

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dedup_lib.rules.policy import Policies

#: The monitor's own columns, every one this module adds: dropped before the verdicts are
#: written.
MONITOR_COLUMNS = (SEND_MICROS, WINDOW, DECIDED, K0, K1, KEYED_CONTENT, C0, C1, MIXED_BATCH)
_SECOND_SEED = "dedup-lib"


@dataclass(frozen=True)
class Keyed:
    """The keyed sends as Spark sends them to the driver, and what the driver adds itself
    (Spark sends less): the send's time from ``send_time``, the window where it is one
    for every entity, the content where it is a text column of the sends."""

    frame: DataFrame
    window: int | None
    content_of: str | None

    def completed(self, table: pa.Table) -> pa.Table:
        """The table Spark sent, with the columns the driver adds."""
        table = table.append_column(SEND_MICROS, table["send_time"].cast(pa.int64()))
        if self.window is not None:
            table = table.append_column(WINDOW, pa.repeat(pa.scalar(self.window), len(table)))
        if self.content_of is not None:
            table = table.append_column(KEYED_CONTENT, table[self.content_of])
        return table


def keyed_sends(sends: DataFrame, policy: Policies, content: list[str]) -> Keyed:
    """``sends`` (valid, typed, with ``event_id``) with this module's columns and the
    verdict, reason and ``dedup_key`` the rules give before any walk (null verdict: a send
    to judge). ``content``: the columns compared as content (none: no content columns)."""
    rules = sql_rules(sends, policy)
    window = window_us(policy)
    entity = text(sends, "entity")
    judged = ~rules.decided
    extra = []
    if isinstance(window, dict):
        extra.append(entity_window(sends, window).alias(WINDOW))
    content_of = None
    if content:
        what = content_key(sends, content)
        plain = len(content) == 1 and isinstance(sends.schema[content[0]].dataType, T.StringType)
        if plain:
            content_of = content[0]
        else:
            extra.append(what.alias(KEYED_CONTENT))
        extra += [
            F.when(what.isNotNull(), F.xxhash64(entity, what)).alias(C0),
            F.when(what.isNotNull(), F.xxhash64(F.lit(_SECOND_SEED), entity, what)).alias(C1),
        ]
    frame = sends.select(
        *(column(c) for c in sends.columns if c != MIXED_BATCH),
        rules.decided.alias(DECIDED),
        F.when(judged, F.xxhash64(entity, rules.key)).alias(K0),
        F.when(judged, F.xxhash64(F.lit(_SECOND_SEED), entity, rules.key)).alias(K1),
        rules.verdict.alias("verdict"),
        rules.reason.alias("reason"),
        rules.key.alias("dedup_key"),
        *extra,
    )
    return Keyed(frame, None if isinstance(window, dict) else window, content_of)
