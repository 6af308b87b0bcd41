"""load_telemetry: formats, column mapping, time parsing and the quarantine."""

from __future__ import annotations

import contextlib
import gzip
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from codegen_kit import configured
from dedup_lib.telemetry.loaded import LoadedTelemetry
from dedup_lib.telemetry.loader import load_telemetry
from dedup_lib.telemetry.times import NUMBER
from telemetry.load_kit import assert_reasons_counted_alike, checked_counts

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(text: str) -> int:
    """Epoch microseconds of an ISO 8601 instant (no offset = UTC)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(microseconds=1)


def write_text(path: Path, text: str, *, bom: bool = False) -> Path:
    data = (("\ufeff" if bom else "") + text).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def write_parquet(path: Path, frame: pd.DataFrame) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path, coerce_timestamps="us", allow_truncated_timestamps=True)
    return path


def times_by_id(loaded: LoadedTelemetry, column: str = "send_time") -> dict[str, int | None]:
    rows = loaded.valid.select("message_id", F.unix_micros(column).alias("t")).collect()
    return {row["message_id"]: row["t"] for row in rows}


@pytest.fixture
def new_york(spark: Any) -> Iterator[None]:
    """A session time zone far from UTC, restored afterwards."""
    with configured(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        yield


@pytest.mark.spark
def test_parquet_round_trip_keeps_other_columns(spark: Any, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "tag": ["x", "y"],
            "message_id": ["a", "b"],
            "send_time": pd.to_datetime(
                ["2024-01-01T10:00:00Z", "2024-01-01T10:00:01.5Z"], format="ISO8601"
            ),
            "entity": ["orders", "orders"],
            "partition_key": ["p", None],
            "session_id": ["s", None],
            "scheduled_enqueue_time": pd.to_datetime([None, "2024-01-01T11:00:00Z"], utc=True),
            "event_id": [10, 11],
            "size": [100, 200],
            "score": [0.5, 1.5],
        }
    )
    path = write_parquet(tmp_path / "sends.parquet", frame)

    loaded = load_telemetry(spark, str(path))

    assert (loaded.format, loaded.mapping, loaded.path) == ("parquet", {}, str(path))
    assert [(f.name, f.dataType) for f in loaded.valid.schema.fields] == [
        ("message_id", T.StringType()),
        ("send_time", T.TimestampType()),
        ("entity", T.StringType()),
        ("partition_key", T.StringType()),
        ("session_id", T.StringType()),
        ("scheduled_enqueue_time", T.TimestampType()),
        ("event_id", T.LongType()),
        ("tag", T.StringType()),
        ("size", T.LongType()),
        ("score", T.DoubleType()),
    ]
    rows = (
        loaded.valid.select(
            "message_id",
            F.unix_micros("send_time").alias("t"),
            F.unix_micros("scheduled_enqueue_time").alias("s"),
            "event_id",
            "tag",
            "size",
            "score",
        )
        .orderBy("message_id")
        .collect()
    )
    assert [tuple(r) for r in rows] == [
        ("a", micros("2024-01-01T10:00:00"), None, 10, "x", 100, 0.5),
        ("b", micros("2024-01-01T10:00:01.5"), micros("2024-01-01T11:00:00"), 11, "y", 200, 1.5),
    ]
    assert checked_counts(loaded) == {"read": 2, "valid": 2, "quarantined": 0, "skipped": 0}


@pytest.mark.connect
@pytest.mark.spark
def test_csv_with_azure_sdk_names(spark: Any, tmp_path: Path) -> None:
    path = write_text(
        tmp_path / "export.csv.gz",
        "MessageId,EnqueuedTimeUtc,PartitionKey,SessionId,ScheduledEnqueueTimeUtc,Body\n"
        "m1,2024-01-01T10:00:00Z,pk,pk,,hello\n"
        'm2,2024-01-01T10:00:00.25+02:00,pk,,2024-01-01T12:00:00Z,"a,b"\n',
        bom=True,
    )

    loaded = load_telemetry(spark, str(path))

    assert loaded.format == "csv"
    assert loaded.mapping == {
        "MessageId": "message_id",
        "EnqueuedTimeUtc": "send_time",
        "PartitionKey": "partition_key",
        "SessionId": "session_id",
        "ScheduledEnqueueTimeUtc": "scheduled_enqueue_time",
    }
    assert loaded.valid.columns == [
        "message_id",
        "send_time",
        "partition_key",
        "session_id",
        "scheduled_enqueue_time",
        "Body",
    ]
    rows = (
        loaded.valid.select(
            "message_id",
            F.unix_micros("send_time"),
            "partition_key",
            "session_id",
            F.unix_micros("scheduled_enqueue_time"),
            "Body",
        )
        .orderBy("message_id")
        .collect()
    )
    assert [tuple(r) for r in rows] == [
        ("m1", micros("2024-01-01T10:00:00"), "pk", "pk", None, "hello"),
        ("m2", micros("2024-01-01T08:00:00.25"), "pk", None, micros("2024-01-01T12:00:00"), "a,b"),
    ]


@pytest.mark.spark
def test_json_lines_types(spark: Any, tmp_path: Path) -> None:
    path = write_text(
        tmp_path / "sends.ndjson",
        '{"message_id": 42, "send_time": 1704103200123, "event_id": 7, "props": {"k": "v"}}\n'
        '{"message_id": "m", "send_time": "2024-01-01T10:00:00Z", "event_id": 8, "n": 1.5}\n',
    )

    loaded = load_telemetry(spark, str(path))

    assert loaded.format == "json"
    schema = {f.name: f.dataType for f in loaded.valid.schema.fields}
    assert schema["message_id"] == T.StringType()
    assert schema["event_id"] == T.LongType()
    assert schema["n"] == T.DoubleType()
    assert isinstance(schema["props"], T.StructType)
    assert "_corrupt_record" not in schema
    assert not any(c.startswith("__") for c in schema)
    rows = loaded.valid.select("message_id", F.unix_micros("send_time"), "props.k", "n")
    assert sorted(tuple(r) for r in rows.collect()) == [
        ("42", micros("2024-01-01T10:00:00.123"), "v", None),
        ("m", micros("2024-01-01T10:00:00"), None, 1.5),
    ]


@pytest.mark.connect
@pytest.mark.spark
def test_folder_of_partitioned_parquet(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "telemetry"
    for day, mid in (("2024-01-01", "a"), ("2024-01-02", "b")):
        frame = pd.DataFrame({"MessageId": [mid], "EnqueuedTimeUtc": [f"{day}T00:00:00Z"]})
        write_parquet(folder / f"day={day}" / "part-0.parquet", frame)
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0.parquet.crc").write_text("")

    loaded = load_telemetry(spark, str(folder), keep_source_file=True)

    assert loaded.format == "parquet"
    assert loaded.valid.columns == ["message_id", "send_time", "day", "source_file"]
    rows = loaded.valid.select("message_id", F.unix_micros("send_time"), "source_file")
    assert sorted((r[0], r[1], r[2].endswith("/part-0.parquet")) for r in rows.collect()) == [
        ("a", micros("2024-01-01T00:00:00"), True),
        ("b", micros("2024-01-02T00:00:00"), True),
    ]


@pytest.mark.spark
def test_user_mapping_and_explicit_format(spark: Any, tmp_path: Path) -> None:
    path = write_text(tmp_path / "sends.txt", "id,ts,pk,note\n1,2024-01-01 10:00:00,k,n\n")
    mapping = {"id": "message_id", "ts": "send_time", "pk": "partition_key"}

    loaded = load_telemetry(spark, str(path), format="csv", mapping=mapping)

    assert loaded.mapping == mapping
    assert loaded.valid.columns == ["message_id", "send_time", "partition_key", "note"]
    assert [
        tuple(r)
        for r in loaded.valid.select(
            "message_id", F.unix_micros("send_time"), "partition_key", "note"
        ).collect()
    ] == [("1", micros("2024-01-01T10:00:00"), "k", "n")]

    with pytest.raises(ValueError, match="mapping names column 'nope'") as info:
        load_telemetry(spark, str(path), format="csv", mapping={"nope": "message_id"})
    assert "sends.txt" in str(info.value)
    assert "columns found: id, ts, pk, note" in str(info.value)


@pytest.mark.spark
def test_ambiguous_columns_need_a_mapping(spark: Any, tmp_path: Path) -> None:
    path = write_text(tmp_path / "twice.csv", "MessageId,message_id,EnqueuedTimeUtc\na,b,1\n")

    with pytest.raises(ValueError, match="'MessageId' and 'message_id'") as info:
        load_telemetry(spark, str(path))
    assert "twice.csv" in str(info.value)
    assert "mapping=" in str(info.value)

    with pytest.raises(ValueError, match="taken by column 'message_id'"):
        load_telemetry(spark, str(path), mapping={"MessageId": "message_id"})

    loaded = load_telemetry(
        spark, str(path), mapping={"MessageId": "message_id", "message_id": "legacy_id"}
    )
    assert loaded.valid.columns == ["message_id", "send_time", "legacy_id"]


@pytest.mark.spark
def test_missing_required_column_explains(spark: Any, tmp_path: Path) -> None:
    path = write_text(tmp_path / "no_time.csv", "MessageId,When\na,2024-01-01\n")

    with pytest.raises(ValueError, match="no send_time column") as info:
        load_telemetry(spark, str(path))
    message = str(info.value)
    assert "no_time.csv" in message
    assert "columns found: MessageId, When" in message
    assert "EnqueuedTimeUtc" in message
    assert "mapping=" in message

    no_id = write_text(tmp_path / "no_id.csv", "Id,send_time\na,2024-01-01\n")
    with pytest.raises(ValueError, match=r"no message_id column.*docs/instrumentation\.md"):
        load_telemetry(spark, str(no_id))


def test_entity_fills_rows_that_name_none(spark: Any, tmp_path: Path) -> None:
    named = write_text(
        tmp_path / "named.csv", "message_id,send_time,entity\na,1700000000,orders\nb,1700000001,\n"
    )
    bare = write_text(tmp_path / "bare.jsonl", '{"message_id": "c", "send_time": 1700000002}\n')

    def entities(path: Path) -> dict[str, str]:
        loaded = load_telemetry(spark, str(path), entity="payments")
        assert loaded.not_send_reasons().empty
        assert loaded.not_sends is not None
        assert loaded.not_sends.count() == 0
        return {r[0]: r[1] for r in loaded.valid.select("message_id", "entity").collect()}

    assert entities(named) == {"a": "orders", "b": "payments"}
    assert entities(bare) == {"c": "payments"}


def test_a_pathlib_path_is_read_as_its_text(spark: Any, tmp_path: Path) -> None:
    sends = write_text(tmp_path / "sends.csv", "message_id,send_time\na,2026-11-03T20:00:00Z\n")
    by_path, by_text = load_telemetry(spark, sends), load_telemetry(spark, str(sends))
    assert by_path.counts() == by_text.counts() == {
        "read": 1, "valid": 1, "quarantined": 0, "skipped": 0
    }  # fmt: skip
    assert by_path.valid.collect() == by_text.valid.collect()


@pytest.mark.connect
@pytest.mark.spark
def test_format_and_path_errors(spark: Any, tmp_path: Path) -> None:
    notes = write_text(tmp_path / "notes.txt", "hello\n")
    with pytest.raises(ValueError, match=r"notes\.txt.*Parquet \(\.parquet\).*JSON Lines"):
        load_telemetry(spark, str(notes))
    with pytest.raises(ValueError, match=r"unknown format 'xml'.*parquet, csv, json, otlp"):
        load_telemetry(spark, str(notes), format="xml")

    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_telemetry(spark, str(missing))

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    write_text(mixed / "a.csv", "message_id,send_time\n")
    write_text(mixed / "b.jsonl", "{}\n")
    with pytest.raises(ValueError, match=r"mixes formats \(csv: a\.csv; json: b\.jsonl\)"):
        load_telemetry(spark, str(mixed))


@pytest.mark.connect
@pytest.mark.spark
def test_unreadable_parquet_names_the_file(spark: Any, tmp_path: Path) -> None:
    text = write_text(tmp_path / "text.parquet", "message_id,send_time\n" * 20)
    good = write_parquet(tmp_path / "cut.parquet", pd.DataFrame({"message_id": ["a"] * 50}))
    good.write_bytes(good.read_bytes()[:-40])

    for path in (text, good):
        with pytest.raises(ValueError, match="expected a Parquet file") as info:
            load_telemetry(spark, str(path))
        assert path.name in str(info.value)


@pytest.mark.connect
@pytest.mark.spark
def test_pandas_parquet_loads_as_pandas_writes_it(spark: Any, tmp_path: Path) -> None:
    """pandas' to_parquet with its defaults (nanosecond timestamps, which Spark refuses on its
    own) loads, on either kind of session, saying so once; the session is left as it was."""
    path = tmp_path / "pandas.parquet"
    times = pd.to_datetime(
        ["2024-01-01 10:00:00.123456789", "2024-01-01 10:00:01"], format="ISO8601"
    )
    pd.DataFrame({"message_id": ["a", "b"], "send_time": times}).to_parquet(path)

    loaded = load_telemetry(spark, str(path))

    assert times_by_id(loaded) == {
        "a": micros("2024-01-01T10:00:00.123457"),
        "b": micros("2024-01-01T10:00:01"),
    }
    assert len(loaded.notes) == 1
    assert "pandas.parquet: nanosecond timestamps" in loaded.notes[0]
    assert spark.conf.get("spark.sql.legacy.parquet.nanosAsLong") == "false"


@pytest.mark.connect
@pytest.mark.spark
@pytest.mark.usefixtures("new_york")
def test_time_text_is_utc_whatever_the_session_zone(spark: Any, tmp_path: Path) -> None:
    cases = {
        "z": ("2024-01-01T10:00:00Z", "2024-01-01T10:00:00"),
        "lower": ("2024-01-01t10:00:00z", "2024-01-01T10:00:00"),
        "lower_zone": ("2024-01-01 10:00:00 utc", "2024-01-01T10:00:00"),
        "region": ("2024-01-01T10:00:00 America/Toronto", "2024-01-01T15:00:00"),
        "offset": ("2024-01-01T10:00:00+02:00", "2024-01-01T08:00:00"),
        "naive": ("2024-01-01T10:00:00", "2024-01-01T10:00:00"),
        "space": ("2024-01-01 10:00:00.123456", "2024-01-01T10:00:00.123456"),
        "padded": ("  2024-01-01T10:00:00Z ", "2024-01-01T10:00:00"),
        "s": ("1704103200", "2024-01-01T10:00:00"),
        "s_frac": ("1704103200.5", "2024-01-01T10:00:00.5"),
        "ms": ("1704103200123", "2024-01-01T10:00:00.123"),
        "us": ("1704103200123456", "2024-01-01T10:00:00.123456"),
        "ns": ("1704103200123456789", "2024-01-01T10:00:00.123457"),
    }
    lines = "".join(f'{key},"{raw}"\n' for key, (raw, _) in cases.items())
    path = write_text(tmp_path / "times.csv", "message_id,send_time\n" + lines)

    loaded = load_telemetry(spark, str(path))

    assert times_by_id(loaded) == {key: micros(utc) for key, (_, utc) in cases.items()}


@pytest.mark.connect
@pytest.mark.spark
@pytest.mark.usefixtures("new_york")
def test_epoch_numbers_in_json(spark: Any, tmp_path: Path) -> None:
    cases = {
        "s": ("1704103200", "2024-01-01T10:00:00"),
        "s_frac": ("1704103200.25", "2024-01-01T10:00:00.25"),
        "ms": ("1704103200123", "2024-01-01T10:00:00.123"),
        "us": ("1704103200123456", "2024-01-01T10:00:00.123456"),
        "ms_text": ('"1704103200123"', "2024-01-01T10:00:00.123"),
    }
    lines = "".join(
        f'{{"message_id": "{key}", "send_time": {raw}}}\n' for key, (raw, _) in cases.items()
    )
    path = write_text(tmp_path / "epochs.jsonl", lines)

    loaded = load_telemetry(spark, str(path))

    assert times_by_id(loaded) == {key: micros(utc) for key, (_, utc) in cases.items()}


def test_text_times_are_matched_once_per_row(spark: Any, tmp_path: Path) -> None:
    """Each pattern a text time is matched with appears once in the plan of the valid rows:
    parse and sentinel rules read the staged number and text (inlined, they matched the
    number pattern 15 times a row and cost the sample's load half its time). No ``upper``:
    its first use costs a cold JVM a second initialising ICU."""
    path = write_text(
        tmp_path / "times.csv",
        "message_id,send_time,scheduled_enqueue_time\na,2024-01-01T10:00:00Z,1704103200\n",
    )
    loaded = load_telemetry(spark, str(path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        loaded.valid.explain()
    plan = out.getvalue()

    # CSV columns are text: one of each pattern per time column.
    assert plan.count(NUMBER) == 2
    assert plan.count("(?!0000)") == 2
    assert "upper(" not in plan
    assert times_by_id(loaded) == {"a": micros("2024-01-01T10:00:00")}
    assert times_by_id(loaded, "scheduled_enqueue_time") == {"a": micros("2024-01-01T10:00:00")}


@pytest.mark.connect
@pytest.mark.spark
@pytest.mark.usefixtures("new_york")
def test_timestamp_ntz_parquet_is_a_utc_wall_clock(spark: Any, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "message_id": ["a", "b"],
            "send_time": pd.to_datetime(
                ["2024-01-01 10:00:00.123456", "2024-07-01 23:30:00"], format="ISO8601"
            ),
            "scheduled_enqueue_time": pd.to_datetime(["2024-03-10 02:30:00", None]),
        }
    )
    path = write_parquet(tmp_path / "naive.parquet", frame)
    assert spark.read.parquet(str(path)).schema["send_time"].dataType == T.TimestampNTZType()

    loaded = load_telemetry(spark, str(path))

    assert loaded.valid.schema["send_time"].dataType == T.TimestampType()
    assert times_by_id(loaded) == {
        "a": micros("2024-01-01T10:00:00.123456"),
        "b": micros("2024-07-01T23:30:00"),
    }
    # 02:30 on 2024-03-10 does not exist in New York; as a UTC wall clock it is fine.
    assert times_by_id(loaded, "scheduled_enqueue_time") == {
        "a": micros("2024-03-10T02:30:00"),
        "b": None,
    }


@pytest.mark.connect
@pytest.mark.spark
def test_csv_quarantine_reasons(spark: Any, tmp_path: Path) -> None:
    path = write_text(
        tmp_path / "dirty.csv",
        "message_id,send_time,scheduled_enqueue_time,note\n"
        "ok,2024-01-01T10:00:00Z,,fine\n"
        "missing,,,a\n"
        'blank,"   ",,b\n'
        "bad,yesterday,,c\n"
        "clock,10:00:00,,today?\n"
        "huge,99999999999999999999999,,year 3e12\n"
        "badsched,2024-01-01T10:00:00Z,soon,d\n"
        "extra,2024-01-01T10:00:00Z,,e,surplus\n"
        "short,2024-01-01T10:00:00Z\n"
        ",,,\n",
    )

    loaded = load_telemetry(spark, str(path))

    rows = loaded.quarantine.collect()
    assert sorted((r["message_id"] or "", r["reason"]) for r in rows) == [
        ("", "missing send_time"),
        ("bad", "unparseable send_time: 'yesterday'"),
        ("badsched", "unparseable scheduled_enqueue_time: 'soon'"),
        ("blank", "missing send_time"),
        ("clock", "unparseable send_time: '10:00:00'"),
        ("extra", "malformed CSV line"),
        ("huge", "unparseable send_time: '99999999999999999999999'"),
        ("missing", "missing send_time"),
        ("short", "malformed CSV line"),
    ]
    assert loaded.quarantine.columns == [
        "message_id",
        "send_time",
        "scheduled_enqueue_time",
        "note",
        "reason",
        "source_file",
    ]
    by_id = {r["message_id"]: r for r in rows}
    assert by_id["bad"]["send_time"] == "yesterday"
    assert by_id["badsched"]["scheduled_enqueue_time"] == "soon"
    assert all(r["source_file"].endswith("/dirty.csv") for r in rows)
    assert "source_file" not in loaded.valid.columns

    assert checked_counts(loaded) == {"read": 10, "valid": 1, "quarantined": 9, "skipped": 0}
    # Column pruning must not change which lines count as malformed.
    assert loaded.valid.select("message_id").count() == 1
    assert loaded.quarantine.select("note").count() == 9
    reasons = loaded.quarantine_reasons()
    assert dict(zip(reasons["reason"], reasons["count"], strict=True)) == {
        "missing send_time": 3,
        "malformed CSV line": 2,
        "unparseable send_time": 3,
        "unparseable scheduled_enqueue_time": 1,
    }
    assert_reasons_counted_alike(loaded)


@pytest.mark.connect
@pytest.mark.spark
def test_json_quarantine_reasons(spark: Any, tmp_path: Path) -> None:
    path = write_text(
        tmp_path / "dirty.jsonl",
        '{"message_id": "ok", "send_time": "2024-01-01T10:00:00Z", "n": 1}\n'
        '{"message_id": "cut", "send_time": \n'
        "not json at all\n"
        '{"message_id": "bad", "send_time": "2024-13-45T00:00:00Z"}\n'
        '{"message_id": "none"}\n',
    )

    loaded = load_telemetry(spark, str(path))

    assert checked_counts(loaded) == {"read": 5, "valid": 1, "quarantined": 4, "skipped": 0}
    malformed = loaded.quarantine.where(F.col("reason") == "malformed JSON line").collect()
    assert len(malformed) == 2
    assert all(r["source_file"].endswith("/dirty.jsonl") for r in malformed)
    reasons = loaded.quarantine_reasons()
    assert dict(zip(reasons["reason"], reasons["count"], strict=True)) == {
        "malformed JSON line": 2,
        "unparseable send_time": 1,
        "missing send_time": 1,
    }
    assert_reasons_counted_alike(loaded)
    assert [r["n"] for r in loaded.valid.collect()] == [1]
