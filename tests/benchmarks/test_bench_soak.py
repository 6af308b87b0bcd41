"""benchmarks/bench_soak.py: the keys held, a figure only where the monitor serves them (a
checkpoint that did not count them from its start serves none, and a run of it still
reports)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from bench_soak import _held, _keys  # noqa: E402


def test_the_keys_held_are_a_count_or_say_why_there_is_none():
    assert _keys(1_234_567.0) == "1.23 M"
    assert _keys(float("nan")) == "not served"
    assert (_held(1_234_567.0), _held(float("nan"))) == ("1,234,567", "—")
