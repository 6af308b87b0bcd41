"""Incident (notebook 04 and its report): each section from the data, its words from the
library's own figures."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dedup_lib import DedupPolicy, Incident, collisions, detect_duplicates, missed_resends
from dedup_lib.analysis.diagnostics import collision_groups, missed_summary
from replay_kit import mixed_scenario

POLICY = DedupPolicy("PT10M")


@pytest.fixture(scope="module")
def sends(spark) -> Any:
    from dedup_lib import generate_telemetry

    frame = generate_telemetry(spark, 1_500, seed=13, scenario=mixed_scenario()).persist()
    yield frame
    frame.unpersist()


def test_the_summary_says_the_diagnostics_figures(sends):
    incident = Incident(sends, POLICY, entity="q1")
    heading = incident.heading()
    (text,) = heading.sentences
    assert heading.metadata == {"dedup_lib": {"title": incident.title}}
    assert re.fullmatch(
        r"Incident postmortem: q1, window PT10M, \d{4}-\d\d-\d\d \d\d:\d\d to .* UTC",
        incident.title,
    )
    judged = detect_duplicates(sends, POLICY)
    misses = missed_summary(missed_resends(judged).where("entity = 'q1'"))
    lost = collision_groups(collisions(judged).where("entity = 'q1'"))
    again = int(misses["resends"].sum())
    assert f"**{again:,} resends reached consumers again**" in text
    assert f"**{int(lost['sends_dropped'].sum()):,} messages were lost**" in text
    (table, *_) = incident.resends_missed().tables
    assert int(table["resends"].sum()) == again


@pytest.mark.connect
def test_without_content_and_ground_truth_sentences_not_zeros(sends):
    bare = sends.drop("logical_id", "attempt", "payload_hash")
    incident = Incident(bare, POLICY)
    (text,) = incident.heading().sentences
    assert "no content to compare" in text
    assert "resends reached consumers again**" not in text
    for section in (incident.ground_truth(), incident.resends_missed(), incident.messages_lost()):
        assert section.tables == []
        (said,) = section.sentences
        assert "The input has no" in said
    (windows,) = incident.other_windows().tables
    assert "resends_caught" not in windows
    assert "No export of what the broker kept" in incident.against_the_broker(None).sentences[0]
    assert len(incident.over_time().figures) == 3
