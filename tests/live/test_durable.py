"""live.durable: a file written whole or not at all, the numbered records of a folder. No
Spark."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from dedup_lib.live.durable import (
    numbered,
    read_arrow,
    read_json,
    remove,
    replace_with,
    write_arrow,
    write_json,
)


def test_json_and_arrow_come_back_as_written(tmp_path: Path) -> None:
    write_json(str(tmp_path / "a" / "x.json"), {"batch": 3, "why": "<b>é</b>"})
    assert read_json(str(tmp_path / "a" / "x.json")) == {"batch": 3, "why": "<b>é</b>"}
    table = pa.table({"k": [1, 2], "s": ["a", None]})
    write_arrow(str(tmp_path / "t.arrow"), table)
    assert read_arrow(str(tmp_path / "t.arrow")).equals(table)
    assert read_arrow(str(tmp_path / "t.arrow"), mapped=True).equals(table)


def test_a_write_that_fails_leaves_the_old_file_and_no_part(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    write_json(str(path), {"old": True})

    def failing(target: str) -> None:
        Path(target).write_text('{"new": ')
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed"):
        replace_with(str(path), failing)
    assert read_json(str(path)) == {"old": True}
    assert os.listdir(tmp_path) == ["x.json"]


def test_numbered_files_come_by_number_and_others_are_left_out(tmp_path: Path) -> None:
    for name in ["plan-10.json", "plan-9.json", "plan-x.json", "plan-1.json.part", "other-2.json"]:
        (tmp_path / name).write_text("{}")
    found = [(n, os.path.basename(p)) for n, p in numbered(str(tmp_path), "plan-", ".json")]
    assert found == [(9, "plan-9.json"), (10, "plan-10.json")]
    assert list(numbered(str(tmp_path / "missing"), "plan-", ".json")) == []


def test_remove_takes_a_file_that_may_be_gone(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    remove(str(tmp_path / "x"))
    remove(str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()
