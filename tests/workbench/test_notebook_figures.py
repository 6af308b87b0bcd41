"""The deterministic figures the notebooks show on the shipped samples, pinned.

Each test makes the library calls of one notebook cell (named in its docstring) and checks the
numbers that cell showed when the notebooks kept them as text outputs checked by nbval. The
notebooks now show them as styled tables, and nbval only checks that they run
(``pytest --nbval-lax``); a change to any of these figures fails here instead.

The figures run on the classic pass. Four run on Spark Connect too (``connect``): the CSV load
and id quality of notebook 1, the incident's verdicts and the sections that say them; the
engine's and the readers' own Connect tests check that both kinds of session give the same
verdicts, and once is enough for the rest of the figures. Each module-scoped fixture computes
its frames once per session kind. Spark compiles expressions here (``codegen_kit``): most of
these figures replay the day sample's 200 k sends.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dedup_lib import (
    DedupPolicy,
    Evidence,
    Incident,
    ReplayCache,
    WindowExplorer,
    WindowSizing,
    by_content,
    collisions,
    count_sweep,
    detect_duplicates,
    findings,
    id_quality,
    load_entity_policies,
    load_telemetry,
    missed_resends,
    sample_path,
    summarize,
)
from dedup_lib.analysis.diagnostics import collision_groups, missed_summary
from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.summaries import most_reused_ids
from dedup_lib.analysis.whatif import compare_keys
from dedup_lib.rules.durations import format_duration, format_window
from dedup_lib.sweep.grid import configurable_window, smallest_window

pytestmark = pytest.mark.usefixtures("compiled_expressions")


def rows(table: pd.DataFrame, columns: list[str] | None = None) -> list[tuple[Any, ...]]:
    """The table's rows as plain Python values: NaN and NaT as None, floats to 6 decimals
    (what the notebooks printed), times as ISO text in UTC."""
    if columns is not None:
        table = table[columns]
    return [tuple(_plain(v) for v in record) for record in table.itertuples(index=False)]


def _plain(value: Any) -> Any:
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, pd.Timestamp):
        stamp = value.tz_convert("UTC") if value.tzinfo else value
        return stamp.tz_localize(None).isoformat(sep=" ")
    if isinstance(value, np.integer | bool):
        return int(value) if not isinstance(value, bool) else value
    if isinstance(value, float | np.floating):
        return round(float(value), 6)
    return value


# -- 01_load_telemetry: the Azure-named CSV export of the day sample -------------------------


@pytest.fixture(scope="module")
def azure_csv(spark) -> Iterator[Any]:
    """The export, its valid sends kept after the first read: the gzip file is one task."""
    loaded = load_telemetry(spark, sample_path("day-azure.csv.gz"))
    valid = loaded.valid.persist()
    yield dataclasses.replace(loaded, valid=valid)
    valid.unpersist()


@pytest.mark.connect
def test_01_rows_read_loaded_and_quarantined(azure_csv):
    """Cells `loaded.counts()` and `loaded.quarantine_reasons()`."""
    assert azure_csv.counts() == {
        "read": 199_870,
        "valid": 199_813,
        "quarantined": 57,
        "skipped": 0,
    }
    assert rows(azure_csv.quarantine_reasons()) == [
        ("unparseable send_time", 42),
        ("missing send_time", 15),
    ]


def test_01_id_quality(azure_csv):
    """Cell `id_quality(loaded.valid)`."""
    table = id_quality(azure_csv.valid)
    assert list(table.columns) == [
        "entity",
        "sends",
        "without_message_id",
        "share_without_id",
        "guid_like",
        "share_guid_like",
        "distinct_ids",
        "sends_per_id",
    ]
    assert rows(table) == [
        ("audit", 3707, 3707, 1.0, 0, 0.0, 0, None),
        ("inventory", 22189, 0, 0.0, 0, 0.0, 400, 55.472),
        ("notifications", 37006, 0, 0.0, 37006, 1.0, 37006, 1.0),
        ("orders", 74040, 0, 0.0, 3704, 0.05, 68770, 1.077),
        ("payments", 62871, 0, 0.0, 14773, 0.235, 60515, 1.039),
        ("(all)", 199813, 3707, 0.0186, 55483, 0.2777, 166691, 1.176),
    ]


def test_01_most_reused_ids(azure_csv):
    """Cell `findings.reused_ids(sends, n=5)`."""
    (table,) = findings.reused_ids(azure_csv.valid, n=5).tables
    pd.testing.assert_frame_equal(
        table, most_reused_ids(azure_csv.valid, n=5)[["entity", "message_id", "sends"]]
    )
    assert rows(table, ["entity", "message_id", "sends"]) == [
        ("orders", "00000000-0000-0000-0000-000000000000", 3704),
        ("inventory", "stock/103", 60),
        ("inventory", "stock/101", 59),
        ("inventory", "stock/112", 59),
        ("inventory", "stock/148", 59),
    ]


# -- 02_window_explorer and 03_window_sizing: the day sample --------------------------------


@pytest.fixture(scope="module")
def day(spark) -> Iterator[Any]:
    """The day sample's valid sends, kept after the first read, as notebook 3 keeps them."""
    valid = load_telemetry(spark, sample_path("day.parquet")).valid.persist()
    yield valid
    valid.unpersist()


@pytest.fixture(scope="module")
def day_caches(day):
    """What `WindowExplorer.from_frame` (notebook 2) and notebook 3 build: one cache per mode."""
    carry = tuple(c for c in ("cause",) if c in day.columns)
    return {mode: ReplayCache.build(day, mode, carry=carry) for mode in (False, True)}


@pytest.fixture(scope="module")
def day_judged(day) -> Iterator[Any]:
    """Notebook 2's replay at 10 minutes, with its missed resends and collisions."""
    judged = detect_duplicates(day, DedupPolicy("PT10M")).persist()
    misses = missed_resends(judged).persist()
    yield judged, misses, collisions(judged)
    misses.unpersist()
    judged.unpersist()


def test_02_explorer_numbers_and_top_keys(day_caches):
    """Cells `view.numbers` and `view.top_keys.head(5)` at 10 minutes, all entities."""
    explorer = WindowExplorer(day_caches, window="PT10M")
    view = explorer.update(window="PT10M", partitioning=False, entity="(all)", draw=False)
    assert rows(view.numbers) == [
        ("sends", "199,813"),
        ("accepted", "187,547"),
        ("dropped as duplicates", "12,203"),
        ("rejected", "63"),
        ("share of judged sends dropped", "6.11%"),
        ("peak ids held", "3,667"),
    ]
    assert rows(view.top_keys.head(5)) == [
        ("orders", "00000000-0000-0000-0000-000000000000", 3704, 3566, 3667),
        ("inventory", "stock/335", 58, 18, 54),
        ("inventory", "stock/340", 58, 18, 54),
        ("inventory", "stock/103", 60, 17, 55),
        ("inventory", "stock/55", 59, 17, 55),  # as many dropped: the most sent first
    ]
    assert list(view.top_keys.columns) == ["entity", "key", "sends", "duplicates", "messages"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [(False, (12_203, 3_563, 2_761, 8_640, 63)), (True, (11_619, 2_979, 2_321, 8_640, 17_751))],
    ids=["partitioning-disabled", "enabled"],
)
def test_02_partitioning_changes_the_figures(day, day_caches, mode, expected):
    """The cell `findings.partitioning_effect(...)` at 10 minutes. `shipping-svc` and
    `payouts-svc` resend under another partition key or session: dropped without
    partitioning, delivered with it."""
    duplicates, caught, extra, lost, rejected = expected
    section = findings.partitioning_effect(day_caches, "PT10M", Evidence.of(day))
    assert section.sentences == []  # the sample has ground truth and partition keys
    (table,) = section.tables
    shown = table.set_index(table.columns[0])["enabled" if mode else "disabled"]
    figures = ("duplicates", "resends_caught", "extra_deliveries", "messages_lost", "rejected")
    assert tuple(int(shown[f]) for f in figures) == (duplicates, caught, extra, lost, rejected)
    view = WindowExplorer(day_caches).update(partitioning=mode, draw=False)
    numbers = dict(rows(view.numbers))
    assert numbers["dropped as duplicates"] == f"{duplicates:,}"
    assert numbers["rejected"] == f"{rejected:,}"


def test_02_partitioning_toggle_matters_on_the_day_sample(day_caches):
    """The toggle must change what the explorer shows beyond the batches it refuses: on
    `orders` (no batches), `shipping-svc`'s resends under another partition key are caught
    without partitioning and delivered again with it."""
    off, on = (day_caches[mode].sweep(["PT10M"]).iloc[0] for mode in (False, True))
    assert on["duplicates"] < off["duplicates"]
    assert on["resends_caught"] < off["resends_caught"]
    truth = {
        mode: day_caches[mode].ground_truth_summary("PT10M").set_index("entity").loc["orders"]
        for mode in (False, True)
    }
    fewer = truth[False]["resends_caught"] - truth[True]["resends_caught"]
    assert fewer > 100
    assert truth[True]["extra_deliveries"] - truth[False]["extra_deliveries"] == fewer


def test_02_missed_resends_and_collisions(day_judged):
    """Cells `missed_summary(misses)` and `collision_groups(lost)` at 10 minutes."""
    _, misses, lost = day_judged
    summary = missed_summary(misses)
    assert rows(summary, ["entity", "miss_cause", "resends", "longest_caught_from"]) == [
        ("audit", "no MessageId", 78, None),
        ("notifications", "new MessageId", 1871, None),
        ("payments", "after the window", 812, 42751.017603),
    ]
    assert rows(collision_groups(lost)) == [
        (
            "inventory",
            "inventory-sync",
            "stock/#",
            5202,
            5111,
            400,
            "2026-11-02 07:40:05.043355",
            "2026-11-02 21:49:50.438487",
        ),
        (
            "orders",
            "legacy-export",
            "all-zero GUID",
            3565,
            3529,
            1,
            "2026-11-02 00:02:05.814338",
            "2026-11-02 23:59:42.013618",
        ),
    ]


def test_02_replay_with_the_entities_real_settings(day):
    """Cells listing `load_entity_policies(entities-arm.json)` and their `summarize`."""
    policies = load_entity_policies(sample_path("entities-arm.json"))
    described = {n: "detection off" if p is None else p.describe() for n, p in policies.items()}
    assert described == {
        "audit": "detection off",
        "inventory": "window 1h, partitioning disabled",
        "notifications": "window 5m, partitioning disabled",
        "orders": "window 10m, partitioning disabled",
        "payments": "window 10m, partitioning enabled",
    }
    table = summarize(detect_duplicates(day, policies))
    assert rows(table) == [
        ("audit", 3707, 3707, 0, 0, 0, 3707, None),
        ("inventory", 22189, 7925, 14264, 0, 0, 0, 0.642841),
        ("notifications", 37006, 37006, 0, 0, 0, 0, 0.0),
        ("orders", 74040, 68907, 5133, 0, 0, 0, 0.069327),
        ("payments", 62871, 43909, 1211, 17751, 0, 0, 0.02684),
        ("(all)", 199813, 161454, 20608, 17751, 0, 3707, 0.115545),
    ]


def test_02_by_content(day):
    """Cell `compare_keys(by_content(loaded.valid, DedupPolicy("PT10M")))`."""
    table = compare_keys(by_content(day, DedupPolicy("PT10M")))
    assert list(table.columns) == [
        "entity",
        "sends",
        "dropped_by_id",
        "dropped_by_content",
        "dropped_by_both",
        "only_by_id",
        "only_by_content",
    ]
    assert rows(table) == [
        ("audit", 3707, 0, 78, 0, 0, 78),
        ("inventory", 22189, 5527, 416, 416, 5111, 0),
        ("notifications", 37006, 0, 1871, 0, 0, 1871),
        ("orders", 74040, 5133, 1604, 1604, 3529, 0),
        ("payments", 62871, 1543, 1543, 1543, 0, 0),
        ("(all)", 199813, 12203, 5512, 3563, 8640, 1949),
    ]


def test_02_by_count_against_the_windows(day, day_caches):
    """Cells `count_sweep(loaded.valid, ...)` and the windows' `sweep` beside it."""
    assert rows(count_sweep(day, (1_000, 20_000, 100_000))) == [
        (1000, 3400, 28543, 3571, 2753, 24972),
        (20000, 60400, 29011, 3975, 2349, 25036),
        (100000, 166629, 29414, 4375, 1949, 25039),
    ]
    windows = day_caches[False].sweep(["PT1M", "PT10M", "PT1H", "P1D"])
    columns = ["window_s", "peak_held", "duplicates", "resends_caught", "messages_lost"]
    assert rows(windows, columns) == [
        (60.0, 544, 7803, 3350, 4452),
        (600.0, 3667, 12203, 3563, 8640),
        (3600.0, 12426, 21066, 3575, 17491),
        (86400.0, 166629, 29414, 4375, 25039),
    ]


@pytest.mark.parametrize(
    ("mode", "expected", "recommended"),
    [
        (
            False,
            (48_342.204025, "13h25m42s", 1.0, 4_375, 0.692, 24_638, 117_243, 0.814),
            ("PT13H30M", "13 hours 30 minutes", 1.0, 24_638, 118_238),
        ),
        (
            True,
            (250.216146, "4m10s", 1.0, 2_979, 0.471, 6_553, 1_773, 1.0),
            ("PT5M", "5 minutes", 1.0, 6_729, 1_772),
        ),
    ],
    ids=["partitioning-disabled", "enabled"],
)
def test_03_smallest_window_reaching_99_percent(day_caches, mode, expected, recommended):
    """Cell of notebook 3: the smallest window reaching the target, and 10 minutes beside it.
    The modes differ on this sample because partitioning refuses the batches of
    `billing-batch` and `refunds-svc` (SPEC section 3): their resends are no longer
    catchable, and their replays after hours no longer ask for a long window."""
    window_s, shown, share, catchable, share_resends, lost, peak, default_share = expected
    sizing = WindowSizing(day_caches, 0.99)
    best = sizing.picks[mode].smallest
    assert best.equals(smallest_window(day_caches[mode].sweep(), 0.99))
    assert round(best["window_s"], 6) == window_s
    assert format_duration(best["window_s"]) == shown
    assert round(best["share_catchable_caught"], 3) == share
    assert int(best["catchable_resends"]) == catchable
    assert round(best["share_resends_caught"], 3) == share_resends
    assert int(best["resends"]) == 6_325
    assert int(best["messages_lost"]) == lost
    assert int(best["peak_held"]) == peak
    default = day_caches[mode].sweep(["PT10M"]).iloc[0]
    assert round(default["share_catchable_caught"], 3) == default_share
    assert int(default["messages_lost"]) == 8_640
    # the window recommended: rounded up to one a person configures, its figures at it
    iso, words, share_at, lost_at, peak_at = recommended
    window = sizing.picks[mode].window
    assert window == configurable_window(best["window_s"])
    assert (format_window(window, "iso"), format_window(window, "words")) == (iso, words)
    at = sizing.picks[mode].at
    assert f"`{iso}` ({words}" in sizing.recommendation().sentences[0]
    assert round(at["share_catchable_caught"], 3) == share_at
    assert (int(at["messages_lost"]), int(at["peak_held"])) == (lost_at, peak_at)


# -- 04_incident_postmortem: the incident sample, with the parameters' defaults --------------

WINDOW = "PT10M"


@pytest.fixture(scope="module")
def incident(spark) -> Iterator[Any]:
    loaded = load_telemetry(spark, sample_path("incident.parquet"))
    carry = tuple(c for c in ("cause",) if c in loaded.valid.columns)
    cache = ReplayCache.build(loaded.valid, False, carry=carry)
    judged = detect_duplicates(loaded.valid, DedupPolicy(WINDOW)).persist()
    yield loaded, cache, judged
    judged.unpersist()


def test_04_input_and_policy(incident):
    """The first cell after the load: what was read, and the policy replayed."""
    loaded, _, _ = incident
    counts = loaded.counts()
    assert (counts["read"], counts["quarantined"]) == (29_872, 0)
    assert DedupPolicy(WINDOW, partitioning=False).describe() == "window 10m, partitioning disabled"


@pytest.mark.connect
def test_04_verdicts_and_ground_truth(incident):
    """Cells `cache.summarize(policy.window)` and the total of `cache.ground_truth_summary`."""
    _, cache, _ = incident
    window = DedupPolicy(WINDOW).window
    assert rows(cache.summarize(window)) == [
        ("notifications", 4092, 4092, 0, 0, 0, 0, 0.0),
        ("orders", 19007, 16062, 2945, 0, 0, 0, 0.154943),
        ("payments", 6773, 6614, 159, 0, 0, 0, 0.023476),
        ("(all)", 29872, 26768, 3104, 0, 0, 0, 0.10391),
    ]
    assert cache.has_ground_truth
    total = cache.ground_truth_summary(window).iloc[-1]
    assert (total.resends, total.resends_caught) == (3_310, 3_104)
    assert (total.extra_deliveries, total.messages_lost) == (206, 0)


@pytest.mark.connect
def test_04_the_sections_say_these_figures(incident):
    """Notebook 4's cells, each an `Incident` section: the same figures, in its words."""
    loaded, _, _ = incident
    sections = Incident(loaded.valid, DedupPolicy(WINDOW))
    assert sections.ground_truth().sentences == [
        "3,310 resends: 3,104 caught, 206 reached consumers again; 0 messages lost"
    ]
    resent = sections.resends_missed()
    (missed,) = resent.tables
    assert len(resent.figures) == 1
    assert rows(missed, ["entity", "miss_cause", "resends"]) == [
        ("notifications", "new MessageId", 206)
    ]
    assert sections.messages_lost().sentences == [
        "No collisions: no message was lost to a reused id."
    ]
    summary = sections.summary()
    assert "**206 resends reached consumers again**" in summary
    assert "**0 messages were lost**" in summary
    assert "None of those resends came after the window" in summary


def test_04_missed_resends_and_collisions(incident):
    """The by-content cell: missed resends with their cause, and no collisions."""
    _, _, judged = incident
    misses = narrow(missed_resends(judged), "(all)", None, None)
    summary = missed_summary(misses)
    assert rows(summary, ["entity", "miss_cause", "resends", "longest_caught_from"]) == [
        ("notifications", "new MessageId", 206, None),
    ]
    assert len(collision_groups(narrow(collisions(judged), "(all)", None, None))) == 0


def test_04_partitioning_misses_the_rekeyed_resends(incident):
    """With partitioning enabled, `shipping-svc`'s resends under another partition key reach
    consumers again, and `missed_resends` says why."""
    loaded, _, _ = incident
    judged = detect_duplicates(loaded.valid, DedupPolicy(WINDOW, partitioning=True))
    summary = missed_summary(missed_resends(judged))
    assert rows(summary, ["entity", "miss_cause", "resends"]) == [
        ("notifications", "new MessageId", 206),
        ("orders", "partition key differs", 164),
    ]


def test_04_other_windows(incident):
    """Cell `cache.sweep([...])`: would another window have helped?"""
    _, cache, _ = incident
    sweep = cache.sweep(["PT20S", "PT1M", "PT5M", WINDOW, "PT1H", "P1D"])
    sweep = sweep.drop_duplicates("window_s")
    columns = [
        "window_s",
        "duplicates",
        "resends_caught",
        "extra_deliveries",
        "messages_lost",
        "peak_held",
    ]
    assert rows(sweep, columns) == [
        (20.0, 2707, 2707, 603, 0, 211),
        (60.0, 2731, 2731, 579, 0, 211),
        (300.0, 3104, 3104, 206, 0, 751),
        (600.0, 3104, 3104, 206, 0, 1496),
        (3600.0, 3104, 3104, 206, 0, 8930),
        (86400.0, 3104, 3104, 206, 0, 26768),
    ]
