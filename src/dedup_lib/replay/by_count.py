"""``detect_duplicates_by_count``: the ActiveMQ Artemis what-if, a history of the last N ids."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import JUDGED, POS
from dedup_lib.errors import InputError
from dedup_lib.replay.kernels import python as arrow_kernel
from dedup_lib.replay.passes import Prepared, finish, judged, originals_type, prepare
from dedup_lib.rules.policy import DedupPolicy

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def detect_duplicates_by_count(
    df: DataFrame, capacity: int, partitioning: bool = False
) -> DataFrame:
    """Every input row once, judged against a cache of the last ``capacity`` accepted ids of
    its entity instead of a time window (ActiveMQ Artemis keeps 20,000; docs/rules.md, section 7).

    The same columns and rules as :func:`detect_duplicates` (key, rejections, sends without
    MessageId); only the history differs: it holds a fixed number of ids, for any time. One
    entity's sends go through one Python worker in time order, so it is slower than the time
    window's replay; a what-if, not the broker.
    """
    return by_counts(df, [capacity], partitioning).result(capacity)


@dataclass(frozen=True)
class CountAnswers:
    """The kernel's answers at several capacities, from one ordering of the sends and one
    pass of the Python kernel: ``judged`` holds them (persist it to read several results
    without another pass), :meth:`result` gives one capacity's verdicts."""

    judged: DataFrame
    prepared: Prepared
    capacities: tuple[int, ...]

    def result(self, capacity: int) -> DataFrame:
        """What :func:`detect_duplicates_by_count` gives at ``capacity``, one of these."""
        if capacity not in self.capacities:
            judged = ", ".join(f"{c:,}" for c in self.capacities)
            raise InputError(
                f"capacity: {capacity!r} was not judged in this pass; it judged {judged}"
            )
        answer = F.col(JUDGED).getField(f"c{self.capacities.index(capacity)}")
        return finish(self.judged.withColumn(JUDGED, answer), self.prepared)


def by_counts(df: DataFrame, capacities: Sequence[int], partitioning: bool = False) -> CountAnswers:
    """Every send judged at each of ``capacities`` (see :func:`detect_duplicates_by_count`)
    in one pass: a sweep of N capacities sorts the sends once, not N times."""
    wanted = tuple(dict.fromkeys(_capacity(c) for c in capacities))
    p = prepare(df, DedupPolicy(partitioning=partitioning, bounds="none"))
    ordered = (
        p.frame.repartition("entity") if p.has_entity else p.frame.repartition(1)
    ).sortWithinPartitions(
        *(["entity"] if p.has_entity else []),
        p.send_time,
        F.col("event_id").asc_nulls_last(),
        POS,
    )
    has_entity = p.has_entity

    def judge(batches: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        return arrow_kernel.count_caches(batches, wanted, has_entity)

    answer = originals_type(ordered)
    returns = T.StructType([T.StructField(f"c{i}", answer) for i in range(len(wanted))])
    group = [F.col(p.key), *([F.col("entity")] if has_entity else [])]
    return CountAnswers(judged(ordered, judge, p.arguments(*group), returns), p, wanted)


def _capacity(capacity: object) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise InputError(f"capacity: expected a positive number of ids, got {capacity!r}")
    return capacity
