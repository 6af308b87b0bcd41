"""ReplayCache: the verdicts of any window from one Spark pass, exactly as detect_duplicates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry, summarize
from dedup_lib.analysis.summaries import ground_truth_summary
from dedup_lib.sweep.cache import ReplayCache
from dedup_lib.sweep.collected import in_replay_order
from dedup_lib.sweep.grid import smallest_window, window_grid
from dedup_lib.testing import Message
from replay_kit import at, frame, mixed_scenario, telemetry

WINDOWS = ["PT1S", "PT20S", "PT10M", "P1D"]
SCENARIO = mixed_scenario()


@pytest.fixture(scope="module")
def sends(spark):
    return generate_telemetry(spark, 6_000, seed=2, scenario=SCENARIO).persist()


@pytest.mark.parametrize("partitioning", [False, True])
def test_cache_agrees_with_the_engine_at_every_window(spark, sends, partitioning):
    cache = ReplayCache.build(sends, partitioning, carry=("cause",))
    assert cache.has_ground_truth
    assert len(cache.repeated) > 500
    sweep = cache.sweep(WINDOWS).set_index("window_s")
    for window in WINDOWS:
        policy = DedupPolicy(window, partitioning=partitioning, bounds="none")
        result = detect_duplicates(sends, policy).persist()
        try:
            summary = summarize(result)
            pd.testing.assert_frame_equal(cache.summarize(window), summary)
            seconds = DedupPolicy(window, bounds="none").window.total_seconds()
            assert sweep.loc[seconds, "duplicates"] == summary.iloc[-1]["duplicates"]
            pd.testing.assert_frame_equal(
                cache.ground_truth_summary(window), ground_truth_summary(result)
            )
            verdicts = result.select("event_id", "verdict", "original_event_id").toPandas()
        finally:
            result.unpersist()
        replay = cache.anchors(window)
        rows = cache.repeated.assign(
            accepted=replay.accepted,
            original=cache.repeated["event_id"].to_numpy()[replay.anchor],
        ).merge(verdicts, on="event_id")
        assert len(rows) == len(cache.repeated)
        assert ((rows.verdict == "accepted") == rows.accepted).all(), window
        dropped = rows[~rows.accepted]
        assert (dropped.original == dropped.original_event_id).all(), window


@settings(max_examples=max(10, settings().max_examples // 3))
@given(
    case=telemetry(),
    window=st.sampled_from(["PT20S", "30s", "1m", "90s"]),
    partitioning=st.booleans(),
)
def test_cache_agrees_with_the_engine_on_edge_cases(spark, case, window, partitioning):
    messages, with_entity, with_event_id = case
    df = frame(spark, messages, with_event_id=with_event_id, with_entity=with_entity)
    policy = DedupPolicy(window, partitioning=partitioning)
    cache = ReplayCache.build(df, partitioning, carry=("row",))
    result = detect_duplicates(df, policy)
    pd.testing.assert_frame_equal(cache.summarize(window), summarize(result))
    engine = result.select("row", "verdict").toPandas().set_index("row")["verdict"]
    replay = cache.anchors(window)
    for row, accepted in zip(cache.repeated["row"], replay.accepted, strict=True):
        assert engine[row] == ("accepted" if accepted else "duplicate")


@pytest.mark.parametrize("partitioning", [False, True])
def test_mixed_batches_are_rejected_only_with_partitioning(spark, partitioning):
    messages = [
        Message("a", at(0), event_id=0, batch_id="b1"),
        Message("c", at(0), event_id=1, batch_id="b1"),
        Message("a", at(30), event_id=2),
        Message("c", at(40), event_id=3, batch_id="b2", partition_key="p"),
        Message("c", at(40), event_id=4, batch_id="b2", partition_key="p"),
    ]
    df = frame(spark, messages)
    cache = ReplayCache.build(df, partitioning, carry=("row",))
    for window in ("PT20S", "PT1M"):
        result = detect_duplicates(df, DedupPolicy(window, partitioning=partitioning))
        pd.testing.assert_frame_equal(cache.summarize(window), summarize(result))
    assert cache.summarize("PT1M").iloc[-1]["rejected"] == (2 if partitioning else 0)
    # Refused, the batch's 'a' is no anchor: 'a' at 30 s is the first accepted.
    assert sorted(cache.repeated["row"]) == ([3, 4] if partitioning else [0, 1, 2, 3, 4])


@pytest.mark.connect
def test_boundary_is_half_open_and_duplicates_do_not_extend(spark):
    messages = [
        Message("a", at(0), event_id=1),
        Message("a", at(59.999999), event_id=2),
        Message("a", at(60), event_id=3),
        Message("a", at(100), event_id=4),
        Message("a", at(119.999999), event_id=5),
        Message("a", at(120), event_id=6),
    ]
    cache = ReplayCache.build(frame(spark, messages), carry=("row",))
    assert list(cache.anchors("PT1M").accepted) == [True, False, True, False, False, True]
    assert list(cache.anchors("PT20S").accepted) == [True, True, False, True, False, True]


@pytest.mark.connect
def test_carry_names_missing_columns(spark):
    with pytest.raises(ValueError, match=r"carry names column.*colour"):
        ReplayCache.build(frame(spark, [Message("a", at(0))]), carry=("colour",))


@pytest.mark.connect
def test_ground_truth_summary_needs_ground_truth(spark):
    cache = ReplayCache.build(frame(spark, [Message("a", at(0)), Message("a", at(1))]))
    assert not cache.has_ground_truth
    with pytest.raises(ValueError, match="no ground truth"):
        cache.ground_truth_summary("PT1M")


@pytest.mark.connect
def test_held_ids_resend_delays_and_the_smallest_window(spark):
    messages = [
        Message("a", at(0), event_id=1),
        Message("a", at(5), event_id=2),
        Message("a", at(30), event_id=3),
        Message("b", at(2), event_id=4),
        Message("c", at(3), event_id=5),
        Message(None, at(4), event_id=6),
    ]
    cache = ReplayCache.build(frame(spark, messages), bucket="PT1S")
    held = cache.held_over_time("PT20S").set_index("time")["held"]
    # at the end of second 4 (time 5 s): a@0, b@2, c@3 are held; a@5 is a duplicate
    assert held[at(5)] == 3
    # a@0 expires at 20 s; a@30 is accepted again
    assert held[at(21)] == 2
    assert held[at(23)] == 1
    assert held[at(31)] == 1
    assert held.max() == 3
    delays = cache.resend_delays()
    assert list(delays["delay_s"]) == [5.0, 25.0]
    assert list(delays["event_id"]) == [2, 3]
    sweep = pd.DataFrame({"window_s": [20.0, 60.0, 600.0], "share_caught": [0.5, 0.99, 1.0]})
    assert smallest_window(sweep)["window_s"] == 60.0
    assert smallest_window(sweep, target=1.1) is None
    assert window_grid()[0] == 20.0
    assert window_grid()[-1] == 604800.0
    assert len(window_grid()) == 50


def test_rows_out_of_order_are_sorted_by_key_and_rank():
    # Spark returns each key's sends together and ranked; any other order is sorted here.
    ordered = pd.DataFrame(
        {
            "entity": ["q", "q", "q", None, None, "", "q"],
            "key": ["a", "a", "a", "a", "a", "a", "b"],
            "time_us": [1, 2, 3, 1, 5, 4, 9],
            "__dedup_rank": [1, 2, 3, 1, 2, 1, 1],
        }
    )
    expected = in_replay_order(ordered.copy())
    assert list(expected["key_number"]) == [0, 0, 0, 1, 1, 2, 3]
    shuffled = in_replay_order(ordered.iloc[[4, 6, 2, 0, 5, 3, 1]].reset_index(drop=True))
    # Keys numbered in order of first appearance; a null entity is not "".
    assert list(shuffled["key_number"]) == [0, 0, 1, 2, 2, 2, 3]
    assert list(shuffled["entity"]) == [None, None, "q", "q", "q", "q", ""]
    assert list(shuffled["time_us"]) == [1, 5, 9, 1, 2, 3, 4]
    assert "__dedup_rank" not in shuffled


def _time_views(verdicts: pd.DataFrame, window_s: float) -> tuple[pd.DataFrame, pd.Series]:
    """Sends over time and ids held, counted from the engine's verdicts one send at a time."""
    timed = verdicts.dropna(subset=["send_time"]).assign(
        entity=lambda t: t["entity"].fillna("(none)"),
        time=lambda t: pd.to_datetime(t["send_time"], utc=True).dt.floor("min"),
    )
    over_time = (
        timed.assign(
            duplicates=timed["verdict"] == "duplicate", rejected=timed["verdict"] == "rejected"
        )
        .groupby(["entity", "time"])
        .agg(
            sends=("verdict", "size"),
            duplicates=("duplicates", "sum"),
            rejected=("rejected", "sum"),
        )
        .reset_index()
    )
    ids = timed["message_id"].fillna("").astype(str) != ""
    kept = timed[(timed["verdict"] == "accepted") & ids]
    width = pd.Timedelta(minutes=max(1, -(-int(window_s) // 60)))
    ends = np.sort(timed["time"].unique()) + pd.Timedelta(minutes=1)
    held = {}
    for entity, mine in kept.groupby("entity")["time"]:
        times = np.sort(mine.to_numpy())
        inside = np.searchsorted(times, ends, side="left") - np.searchsorted(
            times, ends - width, side="left"
        )
        held.update({(entity, end): int(n) for end, n in zip(ends, inside, strict=True)})
    return over_time, pd.Series(held)


@pytest.mark.parametrize("partitioning", [False, True])
def test_the_time_views_count_what_the_engines_verdicts_say(spark, sends, partitioning):
    cache = ReplayCache.build(sends, partitioning)
    for window in ("PT20S", "PT10M"):
        policy = DedupPolicy(window, partitioning=partitioning, bounds="none")
        columns = ["entity", "send_time", "message_id", "verdict"]
        verdicts = detect_duplicates(sends, policy).select(*columns).toPandas()
        over_time, held = _time_views(verdicts, policy.window.total_seconds())
        found = cache.over_time(window).sort_values(["entity", "time"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(found, over_time, check_dtype=False)
        drawn = cache.held_over_time(window).set_index(["entity", "time"])["held"]
        assert drawn.index.is_unique
        compared = drawn.reindex(held.index)
        assert (compared.dropna() == held[compared.notna()]).all(), window
        assert (held[compared.isna()] == 0).all(), "a bucket holding ids is missing"
        assert drawn.groupby(level="time").sum().max() == cache.sweep([window])["peak_held"][0]


def test_top_keys_of_one_entity_are_its_own_even_where_others_drop_more(spark):
    loud = [Message("a", at(s), entity="loud", event_id=s) for s in range(40)]
    quiet = [Message(f"k{n}", at(n + s), entity="quiet", event_id=1_000 + 10 * n + s)
             for n in range(3) for s in range(n + 2)]  # fmt: skip
    cache = ReplayCache.build(frame(spark, loud + quiet))
    top = cache.top_keys("PT1H", n=2, entity="quiet")
    assert list(top["key"].str[-2:]) == ["k2", "k1"]
    assert list(top["duplicates"]) == [3, 2]
    assert list(cache.top_keys("PT1H", n=1)["entity"]) == ["loud"]
    assert cache.top_keys("PT1H", entity="nobody").empty


def test_where_no_send_drops_the_top_keys_are_the_most_sent(spark):
    hours = [Message(f"m{n}", at(3_600 * s), event_id=10 * n + s)
             for n in range(30) for s in (0, 1)]  # fmt: skip
    most = [Message("a-busy", at(3_600 * s), event_id=1_000 + s) for s in range(4)]
    more = [Message("z-busier", at(3_600 * s), event_id=2_000 + s) for s in range(5)]
    cache = ReplayCache.build(frame(spark, hours + most + more))
    top = cache.top_keys("PT1M", n=3)
    assert list(top["key"]) == ["z-busier", "a-busy", "m0"]
    assert list(top["sends"]) == [5, 4, 2]
    assert list(top["duplicates"]) == [0, 0, 0]
    assert list(cache.top_keys("PT2H", n=2)["key"]) == ["z-busier", "a-busy"]


def test_tied_keys_are_picked_without_ordering_them_all():
    from dedup_lib.sweep.codes import most

    score = np.array([5, 1, 1, 7, 1, 1, 1, 1])
    assert list(most(score, 3)) == [0, 3, 1, 2, 4]
    assert list(most(np.zeros(100_000, dtype=np.int64), 10)) == list(range(10))
    assert len(most(score[:0], 10)) == 0


def test_a_build_starts_compiling_the_walk(spark, monkeypatch):
    from dedup_lib.sweep import cache as cache_module

    started = []
    monkeypatch.setattr(cache_module, "compile_in_background", lambda: started.append(1))
    ReplayCache.build(frame(spark, [Message("a", at(0)), Message("a", at(5))]))
    assert started == [1]


def test_resends_without_an_entity_are_under_none_as_in_every_view(spark):
    messages = [Message("a", at(0), entity=None), Message("a", at(5), entity=None)]
    cache = ReplayCache.build(frame(spark, messages))
    assert list(cache.resend_delays()["entity"]) == ["(none)"]
    assert list(cache.over_time("PT1M")["entity"]) == ["(none)"]


def test_the_views_are_an_object_over_the_cache_public_surface(sends):
    """``cache.views`` reads the cache through its public surface (no mixin, no stubs), and the
    cache answers each view under its name, as the notebooks call it."""
    from dedup_lib.sweep.views import CacheViews

    cache = ReplayCache.build(sends)
    assert not isinstance(cache, CacheViews)
    assert cache.views is cache.views
    assert cache.views.cache is cache
    own = CacheViews(cache)
    pd.testing.assert_frame_equal(own.summarize("PT10M"), cache.summarize("PT10M"))
    pd.testing.assert_frame_equal(own.top_keys("PT10M", n=3), cache.top_keys("PT10M", n=3))
    pd.testing.assert_frame_equal(own.sweep(["PT1M"]), cache.sweep(["PT1M"]))
    assert cache.summarize.__doc__ == CacheViews.summarize.__doc__
