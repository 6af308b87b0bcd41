"""WindowSizing (notebook 03): a window picked by the share of resends it catches where there
is ground truth, the sentence saying why not where there is none."""

from __future__ import annotations

from typing import Any

import pytest

from dedup_lib import ReplayCache, WindowSizing
from dedup_lib.rules.durations import format_window
from dedup_lib.sweep.grid import configurable_window, smallest_window
from replay_kit import mixed_scenario


@pytest.fixture(scope="module")
def sends(spark) -> Any:
    from dedup_lib import generate_telemetry

    frame = generate_telemetry(spark, 1_500, seed=12, scenario=mixed_scenario()).persist()
    yield frame
    frame.unpersist()


def _caches(frame: Any) -> dict[bool, ReplayCache]:
    return {mode: ReplayCache.build(frame, mode) for mode in (False, True)}


@pytest.mark.connect
def test_with_ground_truth_the_smallest_window_reaching_the_target_configured(sends):
    caches = _caches(sends)
    sizing = WindowSizing(caches, 0.9)
    for mode, cache in caches.items():
        best = smallest_window(cache.sweep(), 0.9)
        assert best is not None
        window = configurable_window(best["window_s"])
        assert sizing.picks[mode].window == window
        assert sizing.picks[mode].at.equals(cache.sweep([window]).iloc[0])
    (said,) = sizing.recommendation().sentences
    for mode in (False, True):
        assert f"`{format_window(sizing.picks[mode].window, 'iso')}`" in said
    assert len(sizing.charts().figures) == 2
    (choices,) = sizing.choices().tables
    assert list(choices["choice"]).count("10 minutes, for comparison") == 2
    assert "share_catchable_caught" in choices


@pytest.mark.connect
def test_without_ground_truth_no_window_is_picked_and_the_sentence_says_why(sends):
    bare = sends.drop("logical_id", "attempt")
    sizing = WindowSizing(_caches(bare), 0.99)
    assert sizing.picks == {}
    (said,) = sizing.recommendation().sentences
    assert "no ground truth" in said
    assert "no window is picked" in said
    (choices,) = sizing.choices().tables
    assert "share_catchable_caught" not in choices
    assert set(choices["choice"]) == {"10 minutes, for comparison"}
    for figure in sizing.charts().figures:  # what each window drops and holds, no target line
        assert not any(t.name and t.name.startswith("target") for t in figure.data)
