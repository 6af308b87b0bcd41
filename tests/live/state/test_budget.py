"""The driver's state within its memory budget: a micro-batch that could pass it is refused in
a note naming ``--state executors``, counted, and nothing of it written; a restart with room
judges it, once. The indexes' need counts a doubling's old and new tables side by side."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from dedup_lib import DedupPolicy, StateOptions, WatchOptions, sample_path
from dedup_lib.live.output.lines import StateSize
from dedup_lib.live.state.budget import OVER_BUDGET, StateBudget
from dedup_lib.live.state.index import Index
from dedup_lib.live.watch import watch_duplicates


def test_the_need_is_the_peak_of_a_doubling_and_the_table_itself_otherwise() -> None:
    index = Index.empty(64)
    assert index.needs(10) == index.nbytes  # fits under the load factor: no new table
    before = index.nbytes
    need = index.needs(100)  # 64 slots -> 256: both tables at once while the keys move over
    keys = np.arange(200, dtype=np.int64).reshape(-1, 2)
    index.put(keys, np.zeros(100, np.int64), np.zeros(100, np.int64), np.arange(100))
    assert need == before + index.nbytes
    assert index.nbytes == 4 * before


def test_a_micro_batch_is_refused_only_past_the_budget() -> None:
    budget = StateBudget(1000)
    assert budget.refusal(0, 1000, 5) is None
    refused = budget.refusal(7, 1001, 5)
    assert refused is not None
    assert refused.startswith("micro-batch 7 refused: its 5 sends")
    assert "--state executors" in refused


def test_a_refused_micro_batch_is_said_counted_and_judged_after_a_restart_with_room(
    spark, tmp_path
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(sample_path("incident.parquet"), landing / "sends.parquet")
    folders = {"out": str(tmp_path / "out"), "checkpoint": str(tmp_path / "ck")}
    policy = DedupPolicy("PT10M")
    told: list[str] = []
    small = WatchOptions(state=StateOptions(memory=1 << 20))  # below an empty index's 2.6 MiB
    watch = watch_duplicates(
        spark, str(landing), policy, "PT1M", once=True, options=small, on_note=told.append,
        **folders,
    )  # fmt: skip
    assert len(told) == 1, told
    assert told[0].startswith("micro-batch 0 refused: its 29,872 sends could take")
    assert "--state executors" in told[0]
    assert not watch.lines
    assert not list((tmp_path / "out").glob("*.parquet"))
    counters = watch.counters().set_index(["metric", "labels"])["value"]
    assert counters[("dedup_notes_total", f"kind={OVER_BUDGET}")] == 1
    assert counters[("dedup_state_refused_sends", "")] == 29_872

    again = watch_duplicates(spark, str(landing), policy, "PT1M", once=True, **folders)
    judged = pd.read_parquet(tmp_path / "out")
    assert judged["event_id"].is_unique
    assert len(judged) == sum(line.judged for line in again.lines) > 0
    state = again.lines[-1].state
    assert state.budget > state.memory > 0
    assert "of its memory budget" not in str(state)


@pytest.mark.parametrize(
    ("memory", "budget", "warned"), [(850, 1000, True), (799, 1000, False), (900, 0, False)]
)
def test_a_line_warns_from_four_fifths_of_the_budget(memory, budget, warned) -> None:
    told = str(StateSize(10, memory, 0, 0, budget=budget))
    assert ("of its memory budget" in told) is warned
    assert ("--state executors" in told) is warned
