"""replay.by_count without Spark: what a pass of several capacities answers for one it did
not judge."""

from __future__ import annotations

import pytest

from dedup_lib.errors import InputError
from dedup_lib.replay.by_count import CountAnswers


def test_a_capacity_not_judged_in_the_pass_is_a_clear_error():
    answers = CountAnswers(judged=None, prepared=None, capacities=(1_000, 20_000))  # type: ignore[arg-type]
    with pytest.raises(
        InputError, match=r"capacity: 5000 was not judged in this pass; it judged 1,000, 20,000"
    ):
        answers.result(5_000)
