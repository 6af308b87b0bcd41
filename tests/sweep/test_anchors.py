"""walk_anchors: the anchor chain on tiny hand-made arrays and against a send-by-send walk in
Python, without Spark or pandas."""

from __future__ import annotations

import numpy as np
import pytest

from dedup_lib.sweep.anchors import KeyedSends, walk_anchors

S = 1_000_000  # microseconds per second


def walk(key_number: list[int], seconds: list[float], window_s: float):
    time_us = np.array([round(t * S) for t in seconds], dtype=np.int64)
    sends = KeyedSends.of(np.array(key_number, dtype=np.int64), time_us)
    return walk_anchors(sends, round(window_s * S))


def test_a_send_exactly_at_anchor_plus_window_is_accepted_again():
    anchors = walk([0, 0, 0], [0, 59.999999, 60], 60)
    assert anchors.accepted.tolist() == [True, False, True]
    assert anchors.anchor.tolist() == [0, 0, 2]
    assert anchors.window_us == 60 * S


def test_the_window_is_anchored_on_the_accepted_send_not_on_duplicates():
    # 40 and 80 are each within 60 s of the send before them; 80 is 60 s past the anchor at 0.
    anchors = walk([0, 0, 0, 0], [0, 40, 80, 139.999999], 60)
    assert anchors.accepted.tolist() == [True, False, True, False]
    # Duplicates count against the accepted send, not the send just before them.
    assert anchors.anchor.tolist() == [0, 0, 2, 2]


def test_keys_are_walked_apart():
    # Key 1 starts 10 s after key 0's anchor: its own first send, accepted.
    anchors = walk([0, 0, 1, 1, 2], [0, 30, 10, 50, 5], 60)
    assert anchors.accepted.tolist() == [True, False, True, False, True]
    assert anchors.anchor.tolist() == [0, 0, 2, 2, 4]


def test_a_window_near_the_int64_range_still_ends():
    # A window of 2**61 us: each anchor's end is still within int64.
    window_s = (1 << 61) / S
    anchors = walk([0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, window_s], window_s)
    assert anchors.accepted.tolist() == [True, False, True, False, True, True]
    assert anchors.anchor.tolist() == [0, 0, 2, 2, 4, 5]


def test_no_sends():
    anchors = walk([], [], 60)
    assert anchors.accepted.tolist() == []
    assert anchors.anchor.tolist() == []


def _walked_one_send_at_a_time(key_number: np.ndarray, time_us: np.ndarray, window_us: int):
    accepted = np.zeros(len(key_number), dtype=bool)
    anchor = np.zeros(len(key_number), dtype=np.int64)
    for row in range(len(key_number)):
        new_key = row == 0 or key_number[row] != key_number[row - 1]
        if new_key or time_us[row] >= time_us[anchor[row - 1]] + window_us:
            accepted[row], anchor[row] = True, row
        else:
            anchor[row] = anchor[row - 1]
    return accepted, anchor


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_long_chains_end_as_a_send_by_send_walk_ends_them(seed):
    # Keys of 1 to 300 sends, a few seconds apart: at a 3 s window the long ones take
    # hundreds of steps; sends 1 us either side of a window's end.
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 5, 300], size=60)
    numbers = np.repeat(np.arange(len(sizes)), sizes)
    gaps = rng.choice([0, 1, 2, 3, 7], size=len(numbers)) * S + rng.integers(0, 2, len(numbers))
    starts = np.r_[True, numbers[1:] != numbers[:-1]]
    time_us = np.cumsum(np.where(starts, 0, gaps)) + 0
    time_us = (
        time_us
        - np.repeat(time_us[starts], sizes)
        + rng.integers(0, 100 * S, len(sizes)).repeat(sizes)
    )
    for window_us in (3 * S, 3 * S + 1, 60 * S):
        # Strided views, as a column of a frame may give them.
        laid_out = KeyedSends.of(np.repeat(numbers, 2)[::2], np.repeat(time_us, 2)[::2])
        found = walk_anchors(laid_out, window_us)
        accepted, anchor = _walked_one_send_at_a_time(numbers, time_us, window_us)
        assert found.accepted.tolist() == accepted.tolist(), window_us
        assert found.anchor.tolist() == anchor.tolist(), window_us


def test_window_micros_is_window_us_under_its_former_name_and_warns():
    anchors = walk([0, 0], [0, 5], 10)
    with pytest.warns(DeprecationWarning, match="window_us"):
        assert anchors.window_micros == anchors.window_us == 10 * S
