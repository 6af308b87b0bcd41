"""The tally's guard: counts that do not add up are an error naming the file, never a load.

The loads that add up are every test of ``test_load.py`` and ``test_corpus.py`` (each checks
the counts); here, the counts a bug would give, and the files a load counts told apart.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dedup_lib.errors import DedupLibError
from dedup_lib.telemetry import tally
from dedup_lib.telemetry.files import local_file_ids
from dedup_lib.telemetry.loader import load_telemetry
from dedup_lib.telemetry.quarantine import REASON
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


#: Files whose names Spark's rows spell with percent signs, and one in a subfolder; the second
#: holds rows the quarantine takes.
FILES = {
    'a b%20c/"><img src=x onerror=alert(1)>.csv': "m1,2024-01-01T00:00:00Z\nm2,1704067201\n",
    "ü#?[1].csv": "m3,not a time\nm4,\nm5,2024-01-01T00:00:02Z\n",
    "plain.csv": "m6,2024-01-01T00:00:03Z\n",
}
EXPECTED: dict[str, tuple[int, ...]] = {
    'a b%20c/"><img src=x onerror=alert(1)>.csv': (2, 2, 0),
    "plain.csv": (1, 1, 0),
    "ü#?[1].csv": (3, 1, 2),
}


def _per_file(loaded: Any) -> dict[str, tuple[int, ...]]:
    table = loaded.files.set_index("file")
    return {
        f: tuple(int(table.loc[f, k]) for k in ("read", "valid", "quarantined"))
        for f in table.index
    }


def _folder(tmp_path: Path) -> Path:
    for name, rows in FILES.items():
        path = tmp_path / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("message_id,send_time\n" + rows, encoding="utf-8")
    return tmp_path / "in"


#: How the tally tells the files apart: by number (``file_id``), by a hash of the path where
#: the numbers do not tell them apart, and by the rows where a file changed since listed.
TOLD_APART: dict[str, Any] = {
    "by number": None,
    "by path": lambda files: None,
    "by rows": lambda files: {n + 1: f for n, f in (local_file_ids(files) or {}).items()},
}


@pytest.mark.connect
@pytest.mark.spark
@pytest.mark.parametrize("told_apart", TOLD_APART)
def test_each_file_is_counted_and_named_as_the_user_knows_it(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, told_apart: str
) -> None:
    if TOLD_APART[told_apart] is not None:
        monkeypatch.setattr(tally, "local_file_ids", TOLD_APART[told_apart])
    looked_up: list[set[int]] = []
    listed: list[set[str]] = []
    named = tally._file_names

    def spied(frame: Any, keys: set[int], key: Any, known: dict[int, str]) -> dict[int, str]:
        looked_up.append(keys - known.keys())
        listed.append(set(known.values()))
        return named(frame, keys, key, known)

    monkeypatch.setattr(tally, "_file_names", spied)
    loaded = load_telemetry(spark, str(_folder(tmp_path)))
    assert _per_file(loaded) == EXPECTED
    assert loaded.reasons is not None
    reasons = dict(zip(loaded.reasons[REASON], loaded.reasons["count"], strict=True))
    assert reasons == {"missing send_time": 1, "unparseable send_time": 1}
    assert len(looked_up[0]) == (len(FILES) if told_apart == "by rows" else 0)
    numbered = {str(tmp_path / "in" / name) for name in FILES}
    assert (listed[0] == numbered) == (told_apart != "by path")


@pytest.mark.spark
def test_files_whose_hash_no_spelling_gives_are_named_from_their_rows(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Spark spells a path otherwise than its list of files does, the counts still go to
    the right files: the rows name them."""
    monkeypatch.setattr(tally, "local_file_ids", lambda files: None)
    monkeypatch.setattr(tally, "spark_xxhash64", lambda text: 0)
    assert _per_file(load_telemetry(spark, str(_folder(tmp_path)))) == EXPECTED


@pytest.mark.spark
def test_files_alike_in_size_and_time_modified_are_counted_apart(
    spark: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.csv", "b.csv"):
        (folder / name).write_text("message_id,send_time\nm1,\n", encoding="utf-8")
        os.utime(folder / name, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    loaded = load_telemetry(spark, str(folder))
    assert _per_file(loaded) == {"a.csv": (1, 0, 1), "b.csv": (1, 0, 1)}


@pytest.mark.spark
def test_a_quarantined_row_of_no_known_reason_is_an_error(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reason the tally does not know is still counted as quarantined, so the reasons do not
    add up, and the load says so rather than losing it from the reasons."""
    monkeypatch.setattr(tally, "categories", lambda fmt: ("missing send_time",))
    with pytest.raises(DedupLibError, match=r"rows would be lost in .*ü#\?\[1\]\.csv"):
        load_telemetry(spark, str(_folder(tmp_path)))


def test_the_fates_fit_their_bits(spark):
    """A row's fate is 3 bits: valid, six reason categories, unknown. A seventh category
    would read as unknown; it is refused where the numbers are made instead."""
    tally._fate(tuple("abcdef"))
    with pytest.raises(ValueError, match="7 reason categories do not fit in 3 bits"):
        tally._fate(tuple("abcdefg"))
