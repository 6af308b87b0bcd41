"""live.output.sink: a micro-batch's Parquet file written whole, times as Spark writes them,
and the alerts file appended once per micro-batch, a crashed append's part cut away. No
Spark."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_lib.live.output.sink import AlertsFile, part_name, write_part

AT = datetime(2026, 12, 1, 19, 33, 1, 992_000, tzinfo=UTC)


def _alerts(*whys: str) -> pa.Table:
    return pa.table({"kind": ["collision"] * len(whys), "send_time": [AT] * len(whys), "why": whys})


def _said(path: Path) -> list[str]:
    return [json.loads(line)["why"] for line in path.read_text().splitlines()]


def test_a_micro_batch_writes_its_part_again_whole_with_spark_s_times(tmp_path: Path) -> None:
    assert part_name(7) == "part-0000000007.parquet"
    write_part(str(tmp_path), 7, pa.table({"send_time": [AT], "verdict": ["accepted"]}))
    write_part(str(tmp_path), 7, pa.table({"send_time": [AT], "verdict": ["duplicate"]}))
    assert os.listdir(tmp_path) == [part_name(7)]
    table = pq.read_table(tmp_path / part_name(7))
    assert table["verdict"].to_pylist() == ["duplicate"]
    physical = pq.ParquetFile(tmp_path / part_name(7)).schema.column(0).physical_type
    assert physical == "INT96"


def test_each_micro_batch_s_alerts_are_appended_once(tmp_path: Path) -> None:
    alerts = AlertsFile(str(tmp_path / "alerts.jsonl"), str(tmp_path / "ck" / "alerts.json"))
    assert alerts.appended == -1
    alerts.append(0, _alerts("a", "b"))
    alerts.append(0, _alerts("a", "b"))
    alerts.append(2, _alerts("c"))
    alerts.append(1, _alerts("late"))
    assert alerts.appended == 2
    assert _said(tmp_path / "alerts.jsonl") == ["a", "b", "c"]
    assert json.loads((tmp_path / "alerts.jsonl").read_text().splitlines()[0])["send_time"] == (
        "2026-12-01T19:33:01.992000Z"
    )


def test_a_crashed_append_s_lines_are_cut_before_the_next(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    alerts = AlertsFile(str(path), str(tmp_path / "alerts.json"))
    alerts.append(0, _alerts("a"))
    with path.open("ab") as out:  # micro-batch 1 appended, killed before its mark was written
        out.write(b'{"why": "b"}\n{"why": "cut')
    alerts.append(1, _alerts("b"))
    assert _said(path) == ["a", "b"]


def test_two_numberings_append_to_one_file_each_once(tmp_path: Path) -> None:
    """The judge's micro-batches and the resends' query's, each skipped when appended before,
    and a crashed append of either cut before the next."""
    path = tmp_path / "alerts.jsonl"
    alerts = AlertsFile(str(path), str(tmp_path / "alerts.json"))
    alerts.append(3, _alerts("judged 3"))
    alerts.append(0, _alerts("resends 0"), stream="resends")
    alerts.append(3, _alerts("judged 3"))
    alerts.append(0, _alerts("resends 0"), stream="resends")
    with path.open("ab") as out:  # the resends' micro-batch 1 appended, killed before its mark
        out.write(b'{"why": "resends 1"}\n')
    alerts.append(4, _alerts("judged 4"))
    alerts.append(1, _alerts("resends 1"), stream="resends")
    assert alerts.appended == 4
    assert _said(path) == ["judged 3", "resends 0", "judged 4", "resends 1"]
