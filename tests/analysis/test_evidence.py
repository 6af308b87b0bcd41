"""Evidence: what an input's columns let a section say, and the sentence when they do not."""

from __future__ import annotations

import pytest

from dedup_lib import Evidence

MINIMAL = ("message_id", "send_time")
SAMPLE = (*MINIMAL, "entity", "partition_key", "session_id", "batch_id", "logical_id",
          "attempt", "payload_hash")  # fmt: skip


def test_the_samples_columns_allow_every_section():
    evidence = Evidence.of(SAMPLE)
    for need in ("ground truth", "content", "partition keys", "batches"):
        assert evidence.has(need)
        assert evidence.lacks(need, "anything") is None
    assert evidence.content == ("payload_hash",)


@pytest.mark.parametrize(
    ("need", "said"),
    [
        ("ground truth", "no ground truth (`logical_id` and `attempt`, which only the generator"),
        ("content", "no content to compare (`payload_hash`, or the columns `CONTENT` names)"),
        ("partition keys", "no `partition_key` or `session_id` column"),
        ("batches", "no `batch_id` column"),
    ],
)
def test_minimal_columns_say_what_is_missing_and_what_would_provide_it(need, said):
    sentence = Evidence.of(MINIMAL).lacks(need, "how many resends were caught")
    assert sentence is not None
    assert sentence.startswith("The input has ")
    assert said in sentence
    assert "how many resends were caught." in sentence


def test_content_named_by_the_analyst():
    evidence = Evidence.of((*MINIMAL, "Body", "Subject"), ["Body", "Subject"])
    assert evidence.has("content")
    assert evidence.content == ("Body", "Subject")
    missing = Evidence.of(MINIMAL, "Body<b>").lacks("content", "which resends slipped through")
    assert missing is not None
    assert "Body&lt;b&gt;" in missing  # a column name is data: escaped for markdown
    assert "Name columns the input has" in missing


def test_payload_hash_is_not_assumed_when_content_is_named():
    assert Evidence.of(SAMPLE, "Body").lacks("content", "x") is not None
