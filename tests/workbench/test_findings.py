"""The notebooks' sections: figures where the data has what they need (equal to the library's
own calls on the same data), one sentence where it has not, never a table of zeros or an
exception."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from dedup_lib import (
    DedupPolicy,
    Evidence,
    ReplayCache,
    by_content,
    collisions,
    detect_duplicates,
    findings,
    missed_resends,
    sample_path,
    summarize,
)
from dedup_lib.analysis.diagnostics import collision_groups, missed_summary
from dedup_lib.analysis.whatif import compare_keys
from dedup_lib.spark import is_connect
from replay_kit import mixed_scenario

WINDOW = "PT10M"
TRUTH_AND_CONTENT = ("sender", "logical_id", "attempt", "cause", "payload_hash")


@pytest.fixture(scope="module")
def sends(spark) -> Any:
    from dedup_lib import generate_telemetry

    frame = generate_telemetry(spark, 1_500, seed=11, scenario=mixed_scenario()).persist()
    yield frame
    frame.unpersist()


@pytest.fixture(scope="module")
def bare(sends) -> Any:
    """The same sends as real telemetry has them: no ground truth, no content."""
    return sends.drop(*TRUTH_AND_CONTENT)


def _caches(frame: Any) -> dict[bool, ReplayCache]:
    return {mode: ReplayCache.build(frame, mode) for mode in (False, True)}


def _said(section: Any) -> str:
    return " ".join(section.sentences)


@pytest.mark.connect
def test_partitioning_effect_with_ground_truth_is_the_engines_figures(sends):
    section = findings.partitioning_effect(_caches(sends), WINDOW, Evidence.of(sends))
    (table,) = section.tables
    table = table.set_index(table.columns[0])
    for name, mode in (("disabled", False), ("enabled", True)):
        total = summarize(detect_duplicates(sends, DedupPolicy(WINDOW, partitioning=mode)))
        assert table.loc["duplicates", name] == total.iloc[-1]["duplicates"]
        assert table.loc["rejected", name] == total.iloc[-1]["rejected"]
    assert {"resends_caught", "extra_deliveries", "messages_lost"} <= set(table.index)
    assert (table["difference"] == table["enabled"] - table["disabled"]).all()
    assert "ground truth" not in _said(section)


@pytest.mark.connect
def test_without_ground_truth_the_figures_it_has_and_a_sentence(bare):
    caches = _caches(bare)
    section = findings.partitioning_effect(caches, WINDOW, Evidence.of(bare))
    (table,) = section.tables
    assert list(table.iloc[:, 0]) == ["duplicates", "rejected"]  # no zero truth rows
    assert "no ground truth" in _said(section)
    per_entity = findings.truth_per_entity(caches, WINDOW)
    assert per_entity.tables == []
    assert "cannot say how many resends each entity's window caught" in _said(per_entity)
    windows = findings.windows_compared(caches[False], ["PT1M", WINDOW])
    assert list(windows.tables[0].columns) == ["window_s", "peak_held", "duplicates"]
    assert "no ground truth" in _said(windows)


def test_partitioning_that_changes_nothing_says_why(spark):
    frame = spark.createDataFrame(
        [("a", "2026-03-02T00:00:00Z"), ("a", "2026-03-02T00:00:05Z")], ["message_id", "t"]
    ).selectExpr("message_id", "cast(t as timestamp) as send_time")
    section = findings.partitioning_effect(_caches(frame), WINDOW, Evidence.of(frame))
    assert "no `partition_key` or `session_id` column" in _said(section)


def test_resends_missed_and_collisions_are_the_diagnostics(sends):
    result = detect_duplicates(sends, DedupPolicy(WINDOW)).persist()
    missed = findings.resends_missed(result, WINDOW)
    expected = missed_summary(missed_resends(result)).drop(columns="median_delay")
    pd.testing.assert_frame_equal(missed.tables[0], expected)
    assert len(missed.figures) == 1
    lost = findings.collisions_found(result, WINDOW)
    pd.testing.assert_frame_equal(lost.tables[0], collision_groups(collisions(result)))
    keys = findings.content_keys(sends, WINDOW)
    pd.testing.assert_frame_equal(
        keys.tables[0], compare_keys(by_content(sends, DedupPolicy(WINDOW)))
    )
    result.unpersist()


def test_without_content_each_content_section_is_one_sentence(bare):
    result = detect_duplicates(bare, DedupPolicy(WINDOW))
    for section in (
        findings.resends_missed(result, WINDOW),
        findings.collisions_found(result, WINDOW),
        findings.content_keys(bare, WINDOW),
    ):
        assert section.tables == []
        assert section.figures == []
        assert "no content to compare" in _said(section)
    named = findings.resends_missed(result, WINDOW, content=["Body"])
    assert "(Body) are not in the input" in _said(named)


@pytest.mark.connect
def test_content_named_by_the_analyst_is_compared(sends):
    renamed = sends.withColumnRenamed("payload_hash", "body_sha")
    result = detect_duplicates(renamed, DedupPolicy(WINDOW))
    section = findings.resends_missed(result, WINDOW, content="body_sha")
    assert section.tables
    assert int(section.tables[0]["resends"].sum()) > 0


def test_nothing_to_find_is_said_not_shown_empty(spark):
    frame = spark.createDataFrame(
        [(f"m{n}", f"2026-03-02T00:00:{n:02d}Z", "q", f"h{n}") for n in range(30)],
        ["message_id", "t", "entity", "payload_hash"],
    ).selectExpr("message_id", "cast(t as timestamp) as send_time", "entity", "payload_hash")
    result = detect_duplicates(frame, DedupPolicy(WINDOW))
    assert "No resend reached consumers again" in _said(findings.resends_missed(result, WINDOW))
    assert "No message was lost" in _said(findings.collisions_found(result, WINDOW))
    cache = ReplayCache.build(frame, False)
    assert "No send was dropped" in _said(findings.top_keys(cache.top_keys(WINDOW), WINDOW))
    assert "No MessageId was sent more than once" in _said(findings.reused_ids(frame))


def test_entity_settings_from_files_or_how_to_give_them(sends):
    none = findings.entity_settings(sends, None)
    assert "Set `ENTITIES`" in _said(none)
    section = findings.entity_settings(sends, sample_path("entities-arm.json"))
    settings, verdicts = section.tables
    assert "orders" in set(settings["entity"])
    assert list(verdicts.columns)[:3] == ["entity", "sends", "accepted"]


@pytest.mark.connect
def test_the_quarantine_or_that_there_is_none(spark, tmp_path):
    from dedup_lib import load_telemetry

    good = tmp_path / "good.csv"
    good.write_text("message_id,send_time\na,2026-03-02T00:00:00Z\n")
    assert "No row was quarantined" in _said(findings.quarantined(load_telemetry(spark, str(good))))
    bad = tmp_path / "bad.csv"
    bad.write_text("message_id,send_time\na,2026-03-02T00:00:00Z\nb,soon\n")
    reasons, rows = findings.quarantined(load_telemetry(spark, str(bad))).tables
    assert int(reasons["count"].sum()) == 1
    assert list(rows["message_id"]) == ["b"]


@pytest.mark.connect
def test_the_tour_loads_every_shipped_shape_of_the_incident_alike(spark):
    """Its loads run side by side, on threads of one session: each shape still gives the
    incident's sends, every record read accounted for, and the export its own counts."""
    if not is_connect(spark):
        pytest.skip("on classic, notebook 01 runs the tour in JupyterLab (tests/browser)")
    counts, traces, kept = findings.telemetry_shapes(spark, sample_path("day.parquet")).tables
    assert list(counts["file"]) == list(findings.SHAPES)
    assert list(counts["format"]) == ["parquet", "otlp", "app-insights", "app-insights"]
    assert counts["valid"].nunique() == 1
    assert counts["valid"].iloc[0] > 0
    accounted = counts["valid"] + counts["quarantined"] + counts["skipped"]
    assert (accounted == counts["read"]).all(), counts
    assert len(traces) == 5
    assert traces["trace_id"].notna().all()
    assert kept["format"].tolist() == ["sb-explorer"]
    assert int(kept["valid"].iloc[0]) > 0


class _Read:
    """What :func:`findings.rows_read` reads of a load: its counts and its notes."""

    def __init__(self, *notes: str) -> None:
        self.notes = notes

    def counts(self) -> dict[str, int]:
        return {"read": 3, "valid": 2, "quarantined": 1, "skipped": 0}


def test_rows_read_shows_the_counts_then_each_note_as_text():
    (table,) = findings.rows_read(_Read()).parts  # nothing to note: the table alone
    assert table.to_dict("records") == [_Read().counts()]
    note = "<b>land</b>/*_x_*.parquet: nanosecond timestamps read as epoch nanoseconds"
    section = findings.rows_read(_Read(note))
    (sentence,) = section.sentences
    assert sentence.startswith("**Note:** ")
    assert sentence.endswith("nanoseconds.")
    assert "<b>" not in sentence
    assert "&lt;b&gt;land&lt;" in sentence
    assert r"\*\_x\_\*" in sentence  # neither bold nor italic
