"""telemetry.write: canonical telemetry written in each format and naming style, read back by
the loader as it was; a folder or a single file, never over an existing one unless asked."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from dedup_lib.telemetry.loader import load_telemetry
from dedup_lib.telemetry.write import NAMING_STYLES, write_telemetry


def _sends(spark):
    rows = [
        ("a", datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC), "orders", "p", None, 1),
        ("a", datetime(2026, 1, 1, 0, 0, 1, 7, tzinfo=UTC), "orders", None, "s", 2),
        (None, datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC), "audit", None, None, 3),
    ]
    return spark.createDataFrame(
        rows,
        "message_id string, send_time timestamp, entity string, partition_key string, "
        "session_id string, event_id long",
    )


@pytest.mark.parametrize(
    ("name", "fmt", "names"),
    [
        ("sends.parquet", "parquet", "canonical"),
        ("sends.csv.gz", "csv", "azure"),
        ("sends.jsonl", "json", "python"),
        ("sends.csv", "csv", "python"),
    ],
)
def test_write_telemetry_round_trips_through_load(spark, tmp_path, name, fmt, names):
    path = str(tmp_path / name)
    write_telemetry(_sends(spark), path, fmt, names=names, single_file=True)
    assert Path(path).is_file()
    loaded = load_telemetry(spark, path)
    assert loaded.counts() == {"read": 3, "valid": 3, "quarantined": 0, "skipped": 0}
    columns = _sends(spark).columns
    renamed = {n: c for c, n in NAMING_STYLES[names].items() if c in columns and n != c}
    assert loaded.mapping == renamed
    got = loaded.valid.orderBy("event_id").toPandas()
    want = _sends(spark).orderBy("event_id").toPandas()
    # microseconds survive text formats
    assert list(got.send_time) == list(want.send_time)
    assert list(got.message_id.fillna("")) == list(want.message_id.fillna(""))
    assert list(got.partition_key.fillna("")) == list(want.partition_key.fillna(""))


@pytest.mark.connect
def test_write_telemetry_writes_a_folder_and_refuses_to_overwrite(spark, tmp_path):
    path = str(tmp_path / "out")
    write_telemetry(_sends(spark), path)
    assert Path(path).is_dir()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_telemetry(_sends(spark), path)
    write_telemetry(_sends(spark), path, "csv", overwrite=True, single_file=True)
    assert Path(path).is_file()
    assert load_telemetry(spark, path, format="csv").counts()["valid"] == 3


def test_write_telemetry_names_bad_options(spark, tmp_path):
    with pytest.raises(ValueError, match="unknown format 'xlsx'"):
        write_telemetry(_sends(spark), str(tmp_path / "a"), "xlsx")
    with pytest.raises(ValueError, match="unknown naming style 'java'"):
        write_telemetry(_sends(spark), str(tmp_path / "a"), names="java")
