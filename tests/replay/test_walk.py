"""The anchor walk (``dedup_lib.replay.walk``) against the rule walked one send at a time in
plain Python, on keys with and without a held anchor, one window or one per send."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dedup_lib.replay import walk
from dedup_lib.replay.walk import NO_ANCHOR, walk_keys


def _by_hand(
    starts: list[int], times: list[int], windows: list[int], closes: list[int]
) -> tuple[list[bool], list[int]]:
    """docs/rules.md, section 1, as written: a send at or after the open window's end opens
    the next; one before it counts against the send that opened it (-1: the held anchor)."""
    accepted, anchor = [False] * len(times), [-1] * len(times)
    bounds = [*starts, len(times)]
    for key, (first, stop) in enumerate(itertools.pairwise(bounds)):
        end, current = closes[key], -1
        for row in range(first, stop):
            if times[row] >= end:
                accepted[row], end, current = True, times[row] + windows[row], row
            else:
                anchor[row] = current
    return accepted, anchor


@pytest.mark.parametrize("seed", range(20))
def test_the_walk_is_the_rule_send_by_send(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 8, size=rng.integers(1, 30))
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    times = np.concatenate([np.sort(rng.integers(0, 60, size=n)) for n in sizes])
    one_window = bool(seed % 2)
    per_key = rng.integers(1, 25, size=len(sizes))
    windows = np.repeat(per_key[:1] if one_window else per_key, 1 if one_window else sizes)
    closes = np.where(rng.random(len(sizes)) < 0.4, rng.integers(0, 40, len(sizes)), NO_ANCHOR)
    accepted = np.zeros(len(times), dtype=bool)
    anchor = np.full(len(times), -1)
    walk_keys(starts, times, windows, accepted, closes=closes, anchor=anchor)
    each = np.broadcast_to(windows, times.shape)
    want = _by_hand(starts.tolist(), times.tolist(), each.tolist(), closes.tolist())
    assert (accepted.tolist(), anchor.tolist()) == want
    alone = np.zeros(len(times), dtype=bool)
    walk_keys(starts, times, windows, alone)  # no key holds an anchor
    nothing_held = [NO_ANCHOR] * len(starts)
    assert (
        alone.tolist() == _by_hand(starts.tolist(), times.tolist(), each.tolist(), nothing_held)[0]
    )


def test_a_send_exactly_at_the_window_end_opens_the_next() -> None:
    accepted = np.zeros(3, dtype=bool)
    walk_keys(np.array([0]), np.array([0, 9, 10]), np.array([10]), accepted)
    assert accepted.tolist() == [True, False, True]


def test_the_walk_is_compiled_in_the_background_once() -> None:
    walk._compiled.cache_clear()
    walk.compile_in_background.cache_clear()
    thread = walk.compile_in_background()
    assert thread.daemon
    thread.join(timeout=120)
    assert walk._compiled().signatures  # compiled, not only made ready to compile
    assert walk.compile_in_background() is thread


def test_a_process_started_again_loads_the_walk_from_numba_s_cache(tmp_path: Path) -> None:
    code = (
        "from dedup_lib.replay import walk; walk.compile_in_background().join(); "
        "print(sum(walk._compiled().stats.cache_hits.values()))"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    loaded = [
        subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout.strip()
        for _ in range(2)
    ]
    assert loaded == ["0", "1"]  # compiled by the first, loaded by the second
