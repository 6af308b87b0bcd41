"""live.landing.rotation: the Collector's rotated files known by their names, and read as one
stream, backups by time and the active file last. No Spark."""

from __future__ import annotations

from dedup_lib.live.landing.rotation import Member, is_active, member_of, streams

EARLY, LATE = "traces-2026-12-01T19-33-01.992.json", "traces-2026-12-01T20-01-00.000.json"


def test_a_backup_names_its_stream_and_its_time() -> None:
    assert member_of(LATE) == Member("traces.json", "2026-12-01T20-01-00.000", active=False)
    assert member_of("spans-2026-12-01T19-33-01.992") == Member(
        "spans", "2026-12-01T19-33-01.992", active=False
    )
    assert member_of("traces.json") is None
    assert member_of("traces-2026-12-01.json") is None


def test_a_stream_is_its_backups_by_time_then_its_active_file() -> None:
    names = ["b.jsonl", "traces.json", LATE, EARLY, "a.jsonl"]
    assert streams(names) == [["a.jsonl"], ["b.jsonl"], [EARLY, LATE, "traces.json"]]


def test_backups_whose_active_file_is_gone_are_still_one_stream() -> None:
    assert streams([LATE, EARLY]) == [[EARLY, LATE]]


def test_only_the_last_file_of_a_stream_that_is_not_a_backup_is_active() -> None:
    group = [EARLY, LATE, "traces.json"]
    assert is_active("traces.json", group)
    assert not is_active(LATE, group)
    assert not is_active(LATE, [EARLY, LATE])
    assert not is_active("a.jsonl", ["a.jsonl"])
