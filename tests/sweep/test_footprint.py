"""footprint: what a ReplayCache would hold, counted before any of it is collected; a refusal
over budget."""

from __future__ import annotations

from datetime import UTC

import numpy as np
import pyarrow as pa
import pytest
from pyspark import StorageLevel
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry
from dedup_lib.errors import InputError
from dedup_lib.memory import size_in_bytes
from dedup_lib.sweep import footprint, spark_road
from dedup_lib.sweep.collect import collect
from dedup_lib.sweep.footprint import Budget
from replay_kit import mixed_scenario

#: Finite, so that a bound over it has the build count exactly; too large to refuse.
ROOMY = Budget(2**50, "spark.driver.maxResultSize=1p", 2**50, "1 PiB available")


@pytest.fixture(scope="module")
def sends(spark):
    return generate_telemetry(spark, 6_000, seed=2, scenario=mixed_scenario()).persist()


@pytest.fixture
def measured(monkeypatch):
    """The footprints the builds counted, each build made to count them (its bound from the
    counts of every send made too large)."""
    seen: list[footprint.Footprint] = []
    stored = footprint.persist_and_count
    beyond = footprint.Footprint(0, 0, {}, 2**62, 2**62, None, None)
    monkeypatch.setattr(footprint, "at_most", lambda *a, **k: beyond)

    def spy(*args, **kwargs):
        seen.append(stored(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(footprint, "persist_and_count", spy)
    return seen


@pytest.mark.parametrize("partitioning", [False, True])
def test_the_count_is_what_the_build_holds(spark, sends, partitioning, measured, monkeypatch):
    released = []
    release = footprint.release
    monkeypatch.setattr(footprint, "release", lambda *f: (released.extend(f), release(*f)))
    built = collect(sends, partitioning, carry=("cause",), local_rows=0, allowed=ROOMY)
    (found,) = measured
    # What was stored to be counted and collected is let go once collected.
    assert len(released) == 2
    assert all(frame.storageLevel == StorageLevel.NONE for frame in released)
    repeated = built.repeated
    assert found.rows == len(repeated) > 500
    # Messages collected one by one: those sent two or more times (the pass counts every
    # send; the driver takes the rejected ones off).
    verdicts = detect_duplicates(sends, DedupPolicy(partitioning=partitioning))
    assert verdicts.where(F.col("verdict") == "rejected").count() > 0
    per_message = verdicts.groupBy("entity", "logical_id").count()
    assert found.messages == per_message.where("count > 1").count() > 100
    per_entity = repeated["entity"].fillna("(none)").value_counts().to_dict()
    assert found.by_entity == per_entity
    assert list(found.by_entity.values()) == sorted(per_entity.values(), reverse=True)
    first, last = sends.agg(F.min("send_time"), F.max("send_time")).first()
    # To the minute (the build's time buckets), as the refusal says them.
    assert found.first == first.replace(tzinfo=UTC, second=0, microsecond=0)
    assert found.last == last.replace(tzinfo=UTC, second=59, microsecond=999_999)


def built_repeated(sends):
    return collect(sends, False, carry=("cause",), local_rows=0, allowed=ROOMY).repeated


@pytest.mark.connect
def test_the_bytes_are_near_what_the_build_holds(spark, sends, measured):
    built = collect(sends, False, carry=("cause",), local_rows=0, allowed=ROOMY)
    (found,) = measured
    rows = built.repeated.drop(columns=["key_number", "accepted_elsewhere"])
    serialized = pa.Table.from_pandas(rows, preserve_index=False).nbytes
    held = footprint._driver_size(pa.Table.from_pandas(built.repeated, preserve_index=False))
    largest = max(found.rows, found.messages)
    assert 0.5 < found.result_bytes / (serialized * largest / found.rows) < 2
    assert 0.5 < found.driver_bytes / 2 / (held * (found.rows + found.messages) / found.rows) < 2


def test_spark_refusing_the_result_gets_the_same_refusal():
    found = footprint.Footprint(10, 0, {"orders": 10}, 100, 200, None, None)
    limit = Budget(2**30, "spark.driver.maxResultSize=1g", None, "")
    spark_says = RuntimeError(
        "Total size of serialized results of 8 tasks (1100.0 MiB) is "
        "bigger than spark.driver.maxResultSize (1024.0 MiB)"
    )
    refused = footprint.too_large(spark_says, found, limit)
    assert refused is not None
    assert "Spark could not return it within spark.driver.maxResultSize=1g" in str(refused)
    assert "one entity (sends in repeated keys: orders 10)" in str(refused)
    assert footprint.too_large(RuntimeError("disk full"), found, limit) is None


@pytest.mark.connect
def test_over_the_result_limit_the_build_is_refused_before_anything_is_collected(
    spark, sends, measured, monkeypatch
):
    per_entity = built_repeated(sends)["entity"].fillna("(none)").value_counts()
    collected = []
    monkeypatch.setattr(spark_road, "rows_of", lambda *a, **k: collected.append(1))
    limit = Budget(10_000, "spark.driver.maxResultSize=10k", None, "")
    with pytest.raises(InputError) as refused:
        collect(sends, False, carry=("cause",), local_rows=0, allowed=limit)
    assert collected == []
    found = measured[-1]
    message = str(refused.value)
    top = per_entity.index[0]
    assert f"{found.rows:,} sends in keys sent more than once" in message
    assert "over spark.driver.maxResultSize=10k" in message
    listed = ", ".join(f"{name} {count:,}" for name, count in per_entity.items())
    assert f"one entity (sends in repeated keys: {listed})" in message
    assert per_entity[top] > per_entity.iloc[-1]
    first, last = sends.agg(F.min("send_time"), F.max("send_time")).first()
    assert f"span {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC" in message
    assert "time range" in message


def test_over_the_memory_available_the_build_is_refused(spark, sends):
    short = Budget(None, "", 1_000, "0.0 GiB available on this machine")
    with pytest.raises(InputError, match=r"the driver would hold about .* GiB available"):
        collect(sends, True, local_rows=0, allowed=short)


@pytest.mark.connect
def test_within_budget_the_build_goes_on(spark, sends):
    roomy = Budget(2**30, "spark.driver.maxResultSize=1g", 2**33, "8.0 GiB available")
    assert len(collect(sends, True, local_rows=0, allowed=roomy).repeated) > 500


def test_a_small_input_is_not_counted_first(spark, sends, measured):
    collect(sends, False, allowed=Budget(1, "", 1, ""))
    assert measured == []


@pytest.mark.parametrize("truth", [False, True])
def test_when_every_send_would_fit_nothing_is_counted(spark, sends, monkeypatch, truth):
    bounds, measured = [], []
    at_most = footprint.at_most

    def bound(*args, **kwargs):
        bounds.append(at_most(*args, **kwargs))
        return bounds[-1]

    monkeypatch.setattr(footprint, "at_most", bound)
    monkeypatch.setattr(footprint, "persist_and_count", lambda *a: measured.append(a))
    df = sends if truth else sends.drop("logical_id", "attempt")
    built = collect(df, False, carry=("cause",), local_rows=0, allowed=ROOMY)
    assert measured == []
    (most,) = bounds
    fixed = built.fixed
    others = int(fixed.loc[fixed["kind"] == "single", "sends"].sum())
    assert most.rows == len(built.repeated) + others
    assert others > 0
    assert most.messages == (df.count() // 2 if truth else 0)


@pytest.mark.parametrize(
    ("size", "text"), [(2**30, "1.0 GiB"), (1.25 * 2**30, "1.2 GiB"), (10 * 2**20, "10.0 MiB")]
)
def test_sizes_read_in_the_unit_that_fits(size, text):
    assert footprint.readable(size) == text


@pytest.mark.connect
def test_the_session_budget_reads_the_result_limit(spark):
    """The limit the session was started with: half the driver's heap (get_spark), so more
    than Spark's 1 GiB on this machine."""
    setting = spark.conf.get("spark.driver.maxResultSize")
    allowed = footprint.budget(spark)
    assert allowed.result_bytes == size_in_bytes(setting) > 2**30
    assert allowed.result_source == f"spark.driver.maxResultSize={setting}"


@pytest.fixture
def sampled(monkeypatch):
    """The lower bounds the builds took from samples, the exact count never reached."""
    seen: list[footprint.Footprint] = []
    at_least = footprint.at_least

    def spy(*args, **kwargs):
        seen.append(at_least(*args, **kwargs))
        return seen[-1]

    def never(*args, **kwargs):
        raise AssertionError("the rows were gathered and stored before the refusal")

    monkeypatch.setattr(footprint, "at_least", spy)
    monkeypatch.setattr(footprint, "persist_and_count", never)
    return seen


@pytest.mark.connect
def test_every_key_sampled_the_bound_is_the_count_and_refuses_at_once(
    spark, sends, sampled, monkeypatch
):
    per_entity = built_repeated(sends)["entity"].fillna("(none)").value_counts()
    monkeypatch.setattr(footprint, "SAMPLED_KEYS", 1)
    limit = Budget(10_000, "spark.driver.maxResultSize=10k", None, "")
    with pytest.raises(InputError) as refused:
        collect(sends, False, carry=("cause",), local_rows=0, allowed=limit)
    (bound,) = sampled
    assert bound.estimated
    assert bound.rows == per_entity.sum()
    assert bound.by_entity == per_entity.to_dict()
    message = str(refused.value)
    assert f"at least {bound.rows:,} sends in keys sent more than once" in message
    assert "(a bound from samples of one key and one send in 1, taken before gathering" in message
    assert "sends in repeated keys, estimated: " in message
    assert "over spark.driver.maxResultSize=10k" in message


@pytest.mark.parametrize("one_in", [2, 4])
def test_a_sampled_bound_stays_under_the_count(spark, sends, monkeypatch, one_in):
    exact = len(built_repeated(sends))
    bounds = []
    at_least = footprint.at_least
    monkeypatch.setattr(
        footprint,
        "at_least",
        lambda *a: (bounds.append(at_least(*a)), bounds[-1])[1],
    )
    monkeypatch.setattr(footprint, "SAMPLED_KEYS", one_in)
    with pytest.raises(InputError):
        collect(sends, False, carry=("cause",), local_rows=0, allowed=Budget(10_000, "", None, ""))
    (bound,) = bounds
    assert 0 <= bound.rows <= exact


def test_where_every_send_might_fit_no_sample_is_taken(spark, sends, monkeypatch):
    """The bound from the counts is over the budget only with the messages: the sample of
    repeated sends could not refuse, and is not taken."""
    monkeypatch.setattr(
        footprint,
        "at_least",
        lambda *a: pytest.fail("sampled although no bound from it could refuse"),
    )
    size = footprint.RowSize(100, 100)
    sends_count = sends.count()
    # The sends alone fit, the sends and half as many messages do not.
    room = Budget(None, "", int(2 * 1.2 * sends_count * size.held), "")
    monkeypatch.setattr(footprint, "per_row", lambda *a: size)
    built = collect(sends, False, carry=("cause",), local_rows=0, allowed=room)
    assert len(built.repeated) > 500


def _sampled(sizes: np.ndarray, one_in: int, rng: np.random.Generator) -> int:
    """:func:`footprint.from_samples` of keys sent ``sizes`` times, sampled as Spark does."""
    keyed = np.where(rng.random(len(sizes)) < 1 / one_in, sizes, 0)
    first, second = (rng.binomial(sizes, 1 / one_in) for _ in range(2))
    bound, per_key = footprint.from_samples(keyed, first, second, one_in)
    assert per_key.shape == sizes.shape
    return bound


#: Sends per repeated key: many keys sent a few times; a few sent thousands of times (stock
#: levels, a constant id); both; keys sent about as often as one send in 1,024 is drawn
#: (the hardest to tell apart); one key.
POPULATIONS = {
    "light": np.full(2_000_000, 2) + (np.arange(2_000_000) % 3 == 0),
    "heavy": np.r_[np.full(400, 8_000), 550_000],
    "mixed": np.r_[np.full(2_000_000, 2), np.full(400, 8_000), 550_000],
    "near the rate": np.full(5_000, 1_024),
    "one key": np.array([1_000_000]),
}


@pytest.mark.parametrize("population", POPULATIONS)
def test_the_sampled_bound_stays_under_the_truth(population):
    sizes = POPULATIONS[population]
    truth, rng = int(sizes.sum()), np.random.default_rng(7)
    for _ in range(40):
        assert _sampled(sizes, 1024, rng) <= truth


@pytest.mark.parametrize("population", ["light", "heavy", "mixed"])
def test_the_sampled_bound_is_near_the_truth(population):
    """Keys sent a few times are counted by the sample of keys, keys sent thousands of times
    by the sample of sends: the bound is near the truth whichever holds the sends. (Keys
    sent about a thousand times each are seen by neither well: the bound is then far under,
    and the exact count decides.)"""
    sizes = POPULATIONS[population]
    truth, rng = int(sizes.sum()), np.random.default_rng(11)
    for _ in range(20):
        assert _sampled(sizes, 1024, rng) >= 0.75 * truth


def test_the_bound_from_every_key_and_send_is_exact():
    sizes = POPULATIONS["mixed"]
    assert footprint.from_samples(sizes, sizes, sizes, 1)[0] == sizes.sum()
    none = np.array([], dtype=np.int64)
    assert footprint.from_samples(none, none, none, 1024)[0] == 0


@pytest.mark.parametrize("sizes", [np.full(50_000, 1_024), np.full(50_000, 3_000)])
def test_the_estimate_under_the_bound_is_unbiased(sizes):
    """Keys sent about as often as one send in 1,024 is drawn are those whose second draw
    matters: estimated from the draw that chose them, they would count a third too many."""
    rng, estimates = np.random.default_rng(5), []
    for _ in range(40):
        keyed = np.where(rng.random(len(sizes)) < 1 / 1024, sizes, 0)
        first, second = (rng.binomial(sizes, 1 / 1024) for _ in range(2))
        estimates.append(footprint.from_samples(keyed, first, second, 1024)[1].sum())
    assert np.mean(estimates) == pytest.approx(sizes.sum(), rel=0.03)
