"""collect: a small input grouped in the driver gives exactly what the Spark passes give."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dedup_lib import generate_telemetry
from dedup_lib.columns import RANK
from dedup_lib.sweep import collected, spark_road
from dedup_lib.sweep import counts as counts_module
from dedup_lib.sweep.collect import collect
from dedup_lib.sweep.collected import Collected
from dedup_lib.sweep.frames import TEXT, frame_of, texts_of
from replay_kit import frame, mixed_scenario, telemetry


@pytest.fixture(scope="module")
def sends(spark):
    return generate_telemetry(spark, 6_000, seed=2, scenario=mixed_scenario()).persist()


def canonical(c: Collected) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    """The tables in one order: the order of keys (and so the key numbers) is free, the
    order of a key's sends (replay order) is not."""
    by_key = c.repeated.assign(null_entity=c.repeated["entity"].isna()).sort_values(
        ["null_entity", "entity", "key"], na_position="last", kind="stable"
    )
    numbers = pd.factorize(by_key["key_number"])[0]
    repeated = by_key.drop(columns="null_entity").assign(key_number=numbers)
    fixed = c.fixed.sort_values(["entity", "kind", "bucket_us"], na_position="last")
    truth = None if c.truth_fixed is None else c.truth_fixed.sort_values("entity")
    return (
        repeated.reset_index(drop=True),
        fixed.reset_index(drop=True),
        None if truth is None else truth.reset_index(drop=True),
    )


def assert_same(driver: Collected, passes: Collected) -> None:
    for mine, theirs in zip(canonical(driver), canonical(passes), strict=True):
        if theirs is None:
            assert mine is None
        else:
            pd.testing.assert_frame_equal(mine, theirs)
    assert driver.bucket_us == passes.bucket_us


@pytest.fixture
def passes_run(monkeypatch):
    """How many times the Spark passes ran (their aggregation of every send)."""
    calls = []
    counted = counts_module.counted

    def spy(*args, **kwargs):
        calls.append(1)
        return counted(*args, **kwargs)

    monkeypatch.setattr(counts_module, "counted", spy)
    return calls


@pytest.mark.parametrize("partitioning", [False, True])
def test_the_driver_groups_as_the_spark_passes_do(spark, sends, partitioning, passes_run):
    driver = collect(sends, partitioning, carry=("cause",))
    assert passes_run == []
    passes = collect(sends, partitioning, carry=("cause",), local_rows=0)
    assert passes_run == [1]
    assert driver.truth_fixed is not None
    assert len(driver.repeated) > 500
    # Texts held in Arrow's buffers, not as a Python object per row, on both roads.
    assert {passes.repeated[c].dtype for c in ("entity", "key", "cause")} == {TEXT}
    assert_same(driver, passes)


@pytest.mark.connect
def test_an_input_over_the_limit_takes_the_spark_passes(spark, sends, passes_run):
    rows = sends.count()
    over = collect(sends, True, carry=("cause",), local_rows=rows - 1)
    assert passes_run == [1]
    assert_same(collect(sends, True, carry=("cause",)), over)
    collect(sends, True, carry=("cause",), local_rows=rows)
    assert passes_run == [1]


@pytest.mark.connect
def test_an_event_id_the_driver_cannot_order_as_spark_goes_to_the_passes(spark, sends, passes_run):
    df = sends.withColumn("event_id", F.struct(F.col("event_id").alias("n")))
    collect(df)
    assert passes_run == [1]


@pytest.mark.connect
def test_the_passes_rows_convert_through_arrow_as_spark_converts_them(spark, sends):
    """The repeated sends leave Spark through Arrow alone when their types allow: the same
    frame as Spark's toPandas gives, nulls in integer and string columns included (each send
    its own key here, ranked first)."""
    df = sends.select(
        "entity",
        F.col("event_id").cast("string").alias("key"),
        F.lit(1).alias(RANK),
        "event_id",
        F.when(F.col("attempt") > 1, F.col("logical_id")).alias("logical_id"),
        F.when(F.col("attempt") > 1, F.col("attempt")).alias("attempt"),
        F.when(F.col("attempt") > 1, F.col("cause")).alias("cause"),
        (F.col("attempt") > 1).alias("resend"),
    )
    assert 0 < df.where(F.col("logical_id").isNull() & F.col("cause").isNull()).count() < 6_000
    pd.testing.assert_frame_equal(spark_road.rows_of(df, True), spark_road.rows_of(df, False))


@settings(max_examples=max(10, settings().max_examples // 3))
@given(case=telemetry(), partitioning=st.booleans(), truth=st.booleans())
def test_edge_cases_are_grouped_alike(spark, case, partitioning, truth):
    messages, with_entity, with_event_id = case
    df = frame(spark, messages, with_event_id=with_event_id, with_entity=with_entity)
    if truth:
        # Ids shared across entities, some null; attempts some null, some resends.
        row = F.col("row")
        df = df.select(
            "*",
            F.when(row % 5 != 0, (row % 7).cast("long")).alias("logical_id"),
            F.when(row % 4 != 0, row % 3 + 1).alias("attempt"),
        )
    driver = collect(df, partitioning, carry=("row",), bucket="PT20S")
    passes = collect(df, partitioning, carry=("row",), bucket="PT20S", local_rows=0)
    assert (driver.truth_fixed is not None) == truth
    assert_same(driver, passes)


#: Ranked rows as Spark returns them (each key's together, ranked), and orders it must not be
#: taken for: a rank that skips, a key or an entity that changes while the rank goes on, a
#: null entity followed by "" (two keys), a first row that is not a key's first.
RANKED = {
    "entity": ["q", "q", "q", None, None, "", "q"],
    "key": ["a", "a", "a", "a", "a", "a", "b"],
    "__dedup_rank": [1, 2, 3, 1, 2, 1, 1],
}
MISORDERED = {
    "a rank skips": {"__dedup_rank": [1, 2, 4, 1, 2, 1, 1]},
    "the key changes": {"key": ["a", "a", "b", "a", "a", "a", "b"]},
    "the entity changes": {"entity": ["q", "q", "r", None, None, "", "q"]},
    "null then empty": {"__dedup_rank": [1, 2, 3, 1, 2, 3, 1]},
    "no first": {"__dedup_rank": [2, 3, 4, 1, 2, 1, 1]},
}


@pytest.mark.parametrize("change", [None, *MISORDERED])
def test_the_order_check_reads_the_same_from_arrow_and_from_pandas(change: str | None) -> None:
    columns = RANKED | (MISORDERED[change] if change else {})
    # In chunks of three rows: the check compares each row with the next across chunks.
    table = pa.Table.from_batches(pa.table(columns).to_batches(max_chunksize=3))
    ordered = collected.arrow_ordered(table)
    assert ordered is (change is None)
    # The two roads of _rows: Arrow alone, and Spark's toPandas with its texts converted.
    in_arrow = collected.in_replay_order(frame_of(table))
    in_pandas = collected.in_replay_order(texts_of(table.to_pandas(), ["entity", "key"]))
    pd.testing.assert_frame_equal(in_arrow, in_pandas)
    assert collected.arrow_ordered(table.slice(0, 0))


@pytest.mark.parametrize("rejected", [False, True])
def test_the_passes_leave_the_checks_out_only_where_no_send_is_rejected(
    spark, monkeypatch, rejected
):
    """The count of every send tells whether any is rejected; only where none is do the
    repeated sends and the messages skip the rejection checks (a mutation that always skips
    them fails the comparisons above)."""
    calls: list[bool] = []
    with_rules = collected.with_rules

    def spy(df, partitioning, rejections=True):
        calls.append(rejections)
        return with_rules(df, partitioning, rejections)

    monkeypatch.setattr(spark_road, "with_rules", spy)
    rows = [("m1", "2026-01-01 00:00:00", "p"), ("m1", "2026-01-01 00:00:05", "p")]
    if rejected:
        rows.append(("m2", "2026-01-01 00:00:09", "x" * 129))
    df = spark.createDataFrame(rows, "message_id string, send_time string, partition_key string")
    built = collect(df.withColumn("send_time", F.to_timestamp("send_time")), local_rows=0)
    assert (False in calls) is not rejected
    assert len(built.repeated) == 2
    assert (built.fixed["kind"] == "rejected").any() == rejected
