"""The tally's guard: counts that do not add up are an error naming the file, never a load.

The loads that add up are every test of ``test_load.py`` and ``test_corpus.py`` (each checks
the counts); here, the counts a bug would give.
"""

from __future__ import annotations

import pytest

from dedup_lib.errors import DedupLibError
from dedup_lib.telemetry.tally import check_adds_up

ADDS_UP = {"read": 10, "valid": 6, "quarantined": 3, "skipped": 1}


def test_counts_that_add_up_pass() -> None:
    check_adds_up("sends.csv", ADDS_UP)
    check_adds_up("sends.csv", ADDS_UP, reasons=3)


@pytest.mark.parametrize(
    ("changed", "reasons"),
    [({"valid": 5}, None), ({"skipped": 2}, None), ({"read": 9}, None), ({}, 2)],
    ids=["a row lost", "a row twice", "fewer read", "a reason lost"],
)
def test_counts_that_do_not_add_up_name_the_file_and_the_figures(
    changed: dict[str, int], reasons: int | None
) -> None:
    counts = ADDS_UP | changed
    with pytest.raises(DedupLibError, match=r"rows would be lost in sends\.csv") as raised:
        check_adds_up("sends.csv", counts, reasons)
    said = str(raised.value)
    assert f"{counts['read']} read" in said
    assert f"{counts['valid']} valid" in said
    assert "a bug in dedup_lib" in said
