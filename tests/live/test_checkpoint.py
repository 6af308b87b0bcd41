"""live.checkpoint: the settings a checkpoint belongs to, refused when they change; where each
micro-batch's records lie; its plan and its commit read back as they were written. No
Spark."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from dedup_lib import DedupPolicy
from dedup_lib.errors import InputError
from dedup_lib.live.checkpoint import Commit, Folders, PlanRecord, Settings, check_settings
from dedup_lib.live.landing.ledger import Reading, Seen
from dedup_lib.live.output.lines import BatchLine, StateSize
from dedup_lib.live.output.totals import Totals

SETTINGS = Settings(
    policy=DedupPolicy("PT10M"),
    lateness=timedelta(minutes=2),
    horizon=None,
    content=["body"],
    reading=Reading("json"),
)


def _folders(tmp_path: Path) -> Folders:
    return Folders(str(tmp_path / "out"), str(tmp_path / "ck"), str(tmp_path / "q"), None)


def test_a_checkpoint_keeps_the_settings_it_began_with(tmp_path: Path) -> None:
    check_settings(str(tmp_path), SETTINGS)
    check_settings(str(tmp_path), replace(SETTINGS, reading=Reading("json", settle=1.0)))
    recorded = json.loads((tmp_path / "settings.json").read_text())
    assert recorded["lateness_ms"] == 120_000
    assert recorded["format"] == "json"
    later = replace(SETTINGS, lateness=timedelta(minutes=5), content=[])
    with pytest.raises(InputError, match=r"other lateness_ms, content \(lateness_ms=120000"):
        check_settings(str(tmp_path), later)


def test_a_checkpoint_of_one_state_mode_is_refused_by_the_other(tmp_path: Path) -> None:
    check_settings(str(tmp_path), SETTINGS)
    executors = replace(SETTINGS, state="executors")
    with pytest.raises(InputError, match=r"started with --state driver, .* go on with --state "):
        check_settings(str(tmp_path), executors)
    other = tmp_path / "other"
    check_settings(str(other), executors)
    with pytest.raises(InputError, match=r"started with --state executors, .* --state driver does"):
        check_settings(str(other), SETTINGS)


def test_a_checkpoint_from_before_the_modes_is_the_driver_s(tmp_path: Path) -> None:
    check_settings(str(tmp_path), SETTINGS)
    recorded = json.loads((tmp_path / "settings.json").read_text())
    del recorded["state"]
    (tmp_path / "settings.json").write_text(json.dumps(recorded))
    check_settings(str(tmp_path), SETTINGS)
    with pytest.raises(InputError, match="started with --state driver"):
        check_settings(str(tmp_path), replace(SETTINGS, state="executors"))


def test_a_checkpoint_of_the_executors_earlier_layout_is_refused(tmp_path: Path) -> None:
    executors = replace(SETTINGS, state="executors")
    check_settings(str(tmp_path), executors)
    check_settings(str(tmp_path), executors)
    recorded = json.loads((tmp_path / "settings.json").read_text())
    assert recorded["executors_layout"] == 4
    # the resends' copies a key each; anchors without their content; anchor and timer apart
    for earlier in (3, 2, None):
        if earlier is None:
            del recorded["executors_layout"]  # as the first version wrote it
        else:
            recorded["executors_layout"] = earlier
        (tmp_path / "settings.json").write_text(json.dumps(recorded))
        with pytest.raises(InputError, match=r"an earlier version .* start a new checkpoint"):
            check_settings(str(tmp_path), executors)
    assert "executors_layout" not in SETTINGS.identity()  # the driver's mode has none


def test_per_entity_policies_are_part_of_the_identity() -> None:
    policies = {"b": DedupPolicy("PT1M", partitioning=True), "a": None}
    rules = replace(SETTINGS, policy=policies).identity()["policy"]
    assert json.loads(json.dumps(rules)) == {"a": None, "b": [60_000_000, True]}


def test_each_micro_batch_s_records_are_found_by_number(tmp_path: Path) -> None:
    folders = _folders(tmp_path)
    assert folders.record("plans", 3) == str(tmp_path / "ck" / "plans" / "plan-0000000003.json")
    assert folders.record("pending", 3).endswith(
        os.path.join("pending", "pending-0000000003.arrow")
    )
    for batch in (12, 3):
        PlanRecord(batch, [], {}, {}, []).write(folders)
    assert [n for n, _ in folders.records("plans")] == [3, 12]
    assert list(folders.records("commits")) == []


def test_a_plan_reads_back_as_it_was_written(tmp_path: Path) -> None:
    folders = _folders(tmp_path)
    seen = Seen("traces.json", 900, 1, taken=880, head="ab", head_len=2, said=("unfinished",))
    plan = PlanRecord(4, ["ck/chunks/chunk-000000.json"], {"chunk-000000.json": "traces.json"},
                      {"1:2": seen}, ["unfinished"])  # fmt: skip
    plan.write(folders)
    with open(folders.record("plans", 4), encoding="utf-8") as file:
        assert PlanRecord.from_json(json.load(file)) == plan


def test_a_commit_reads_back_as_it_was_written(tmp_path: Path) -> None:
    folders = _folders(tmp_path)
    minutes = pd.DataFrame(
        {
            "minute": pd.to_datetime(["2026-11-03 21:00"]),
            "sends": [3],
            "duplicates": [1],
            "late": [0],
        }
    )
    alerted = pd.DataFrame({"minute": pd.to_datetime([]), "kind": [], "alerts": []})
    line = BatchLine(4, minutes, [], StateSize(10, 1 << 20, 4096, 0), alerted)
    totals = Totals(rows=3, batches=5, judged_at=1.5)
    commit = Commit(4, 1_764_000_000_000, {"read": 3, "valid": 3}, line, totals)
    commit.write(folders)
    with open(folders.record("commits", 4), encoding="utf-8") as file:
        back = Commit.from_json(json.load(file))
    assert json.dumps(back.to_json(), default=str) == json.dumps(commit.to_json(), default=str)
    assert str(back.line) == str(line)
