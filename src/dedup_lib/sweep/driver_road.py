"""The driver's road of :func:`dedup_lib.sweep.collect.collect`: an input small enough is
judged in one narrow Spark job and grouped here, with Arrow, into the same tables the
Spark road gives. On a small input most of a Spark pass is planning and compiling it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dedup_lib.analysis.totals import NO_ENTITY
from dedup_lib.columns import NO_EVENT_ID, RANK
from dedup_lib.sweep import counts
from dedup_lib.sweep.collected import Collected, finish, in_replay_order
from dedup_lib.sweep.frames import frame_of

if TYPE_CHECKING:
    pass


def collect_in_driver(judged: pa.Table, truth: bool, bucket_us: int) -> Collected:
    """What the Spark passes give, from every send judged (:func:`judged_sends`), grouped with
    Arrow: the same columns, and the same types once in pandas."""
    named = pc.fill_null(judged["entity"].cast(pa.string()), NO_ENTITY)
    keys = judged.select(["kind", "bucket_us"]).append_column("entity", named)
    sums: list[tuple[str | list[str], str]] = [([], "count_all")]
    if truth:
        resend = pc.fill_null(pc.greater(judged["attempt"], 1), False).cast(pa.int64())
        keys = keys.append_column("resend", resend)
        sums.append(("resend", "sum"))
    counted = keys.group_by(["entity", "kind", "bucket_us"], use_threads=False).aggregate(sums)
    names = ["entity", "kind", "bucket_us", "sends", *(["resends"] if truth else [])]
    counted = counted.select(
        ["entity", "kind", "bucket_us", "count_all"] + (["resend_sum"] if truth else [])
    ).rename_columns(names)
    rows = in_replay_order(_repeated_locally(judged))
    messages = _messages_locally(judged, named) if truth else None
    return finish(rows, counts.kind_names(counted.to_pandas()), lambda: messages, bucket_us, truth)


def _repeated_locally(judged: pa.Table) -> pd.DataFrame:
    """The sends of keys judged more than once, each key's together in replay order, with
    their rank in the key: as :func:`_repeated_sends` returns them."""
    eligible = judged.filter(pc.is_valid(judged["key"]))
    # Spark's order: event_id nulls last (said as a column: pyarrow's option moved in 25).
    no_event_id = eligible["event_id"].is_null()
    order = pc.sort_indices(
        eligible.append_column(NO_EVENT_ID, no_event_id),
        sort_keys=[
            (c, "ascending") for c in ("entity", "key", "time_us", NO_EVENT_ID, "event_id", "pos")
        ],
    )
    eligible = eligible.take(order)
    entity = eligible["entity"].to_numpy(zero_copy_only=False)
    key = eligible["key"].to_numpy(zero_copy_only=False)
    same = (entity[1:] == entity[:-1]) & (key[1:] == key[:-1])
    starts = np.flatnonzero(np.r_[True, ~same])
    sizes = np.diff(np.r_[starts, len(key)])
    rank = np.arange(len(key)) - np.repeat(starts, sizes) + 1
    repeated = np.repeat(sizes > 1, sizes)
    rows = frame_of(eligible.filter(pa.array(repeated)).drop_columns(["kind", "bucket_us"]))
    rows[RANK] = rank[repeated].astype(np.int32)
    return rows


def _messages_locally(judged: pa.Table, named: pa.ChunkedArray) -> pa.Table:
    """:func:`_message_groups` from every send judged."""
    unrejected = pc.not_equal(judged["kind"], counts.REJECTED_KIND).cast(pa.int64())
    per_message = (
        pa.table({"entity": named, "logical_id": judged["logical_id"], "unrejected": unrejected})
        .group_by(["entity", "logical_id"], use_threads=False)
        .aggregate([("unrejected", "sum")])
    )
    count = per_message["unrejected_sum"]
    several = pc.greater_equal(count, 2)
    null_id = pa.nulls(len(several), per_message["logical_id"].type)
    grouped = pa.table(
        {
            "entity": per_message["entity"],
            "several": several,
            "logical_id": pc.if_else(several, per_message["logical_id"], null_id),
            "none": pc.equal(count, 0).cast(pa.int64()),
            "unrejected": count,
        }
    ).group_by(["entity", "several", "logical_id"], use_threads=False)
    table = grouped.aggregate([([], "count_all"), ("none", "sum"), ("unrejected", "max")])
    return table.select(
        ["entity", "several", "logical_id", "count_all", "none_sum", "unrejected_max"]
    ).rename_columns(
        ["entity", "several", "logical_id", "messages", "messages_rejected", "unrejected"]
    )
