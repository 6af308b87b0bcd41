"""Service Bus Explorer exports: both ``properties`` shapes, sentinels, entity from the file
name, key overrides, a damaged file, and a round trip from the generator."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry
from dedup_lib.columns import CORRUPT, NOT_SEND
from dedup_lib.errors import InputError
from dedup_lib.synth.exports import write_sb_explorer
from dedup_lib.synth.exports.single_file import dotnet_time
from dedup_lib.telemetry.formats.sb_explorer import SB_EXPLORER
from telemetry.formats.record_kit import canonical, micros, records, rows, sends

# As the tool's documentation shows one saved message (properties as an object).
SINGLE = """{
  "body": {"deviceid": 84, "value": 68},
  "contentType": null,
  "deliveryCount": 1,
  "enqueuedSequenceNumber": 1,
  "enqueuedTimeUtc": "2014-12-03T16:39:48.4958476Z",
  "expiresAtUtc": "9999-12-31T23:59:59.9999999",
  "label": "Service Bus Explorer",
  "messageId": "5cbc08aa-dca5-434b-bc27-afc8ba98307f",
  "partitionKey": "18",
  "properties": {"deviceId": 84, "OrderId": "o-1", "city": "Milan"},
  "scheduledEnqueueTimeUtc": "0001-01-01T00:00:00",
  "sequenceNumber": 281474976710657,
  "sessionId": null,
  "timeToLive": "10675199.02:48:05.4775807"
}
"""


def _message(mid: str, enqueued: str, scheduled: str, **extra: Any) -> dict[str, Any]:
    return {
        "body": "hello",
        "enqueuedTimeUtc": enqueued,
        "messageId": mid,
        "partitionKey": extra.get("pk"),
        "properties": [
            {"key": "OrderId", "type": "String", "value": f"order-{mid}"},
            {"key": "BatchId", "type": "String", "value": "b-7"},
        ],
        "scheduledEnqueueTimeUtc": scheduled,
        "sequenceNumber": extra.get("seq", 1),
        "sessionId": extra.get("session"),
    }


# As the tool writes since 2022: an indented array, properties as key/type/value entries.
ARRAY = [
    _message("a", "2026-11-03T21:00:00.1234567Z", "9999-12-31T23:59:59.9999999", seq=10),
    _message("b", "2026-11-03T21:00:01Z", "2026-11-03T22:00:00Z", seq=11, session="s1"),
    _message("a", "2026-11-03T21:00:05.5Z", "0001-01-01T00:00:00", seq=12, pk="p"),
]


def _write(path: Path, text: str) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _by_id(frame: Any, *columns: str) -> dict[Any, tuple[Any, ...]]:
    return {r[0]: tuple(r[1:]) for r in rows(frame, "message_id", *columns)}


def test_a_single_object_as_documented(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "orders.json", SINGLE)
    got = records(spark, SB_EXPLORER, [path])
    assert got.count() == 1
    row = got.first()
    assert row is not None
    assert row["message_id"] == "5cbc08aa-dca5-434b-bc27-afc8ba98307f"
    assert row["entity"] == "orders"
    assert row["partition_key"] == "18"
    assert row["session_id"] is None
    assert row["scheduled_enqueue_time"] is None
    assert row["sequence_number"] == 281474976710657
    assert row[NOT_SEND] is None
    assert row["source_file"].endswith("orders.json")
    parsed = sends(got).select(F.unix_micros("send_time")).first()
    assert parsed is not None
    assert parsed[0] == micros("2014-12-03T16:39:48.495847+00:00")


@pytest.mark.connect
def test_an_array_with_property_entries_and_sentinels(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "billing.eu.json.gz", json.dumps(ARRAY, indent=2))
    got = sends(records(spark, SB_EXPLORER, [path]))
    assert rows(got, "message_id", "entity", "send_time", "scheduled_enqueue_time") == sorted(
        [
            ("a", "billing.eu", micros("2026-11-03T21:00:00.123456"), None),
            ("a", "billing.eu", micros("2026-11-03T21:00:05.5"), None),
            ("b", "billing.eu", micros("2026-11-03T21:00:01"), micros("2026-11-03T22:00:00")),
        ],
        key=repr,
    )
    assert _by_id(got.where("message_id = 'b'"), "session_id", "batch_id") == {"b": ("s1", "b-7")}


def test_entity_argument_and_default_file_names(spark: Any, tmp_path: Path) -> None:
    named = _write(tmp_path / "orders.json", SINGLE)
    default = _write(tmp_path / "BrokeredMessage_Contoso_11-24-2026 01-30-00.json", SINGLE)
    by_file = rows(records(spark, SB_EXPLORER, [named, default]), "entity")
    assert by_file == sorted([("orders",), (None,)], key=repr)
    given = rows(records(spark, SB_EXPLORER, [named, default], entity="payments"), "entity")
    assert given == [("payments",), ("payments",)]
    mapped = records(spark, SB_EXPLORER, [named], {"entity": "properties.city"}, "payments")
    assert rows(mapped, "entity") == [("Milan",)]


def test_keys_can_name_application_properties(spark: Any, tmp_path: Path) -> None:
    single = _write(tmp_path / "one.json", SINGLE)
    array = _write(tmp_path / "many.json", json.dumps(ARRAY))
    overrides = {"message_id": "properties.OrderId", "partition_key": "Label"}
    for paths in ([single], [array], [single, array]):
        got = records(spark, SB_EXPLORER, paths, overrides)
        ids = {r["message_id"] for r in got.collect()}
        expected = ({"o-1"} if single in paths else set()) | (
            {"order-a", "order-b"} if array in paths else set()
        )
        assert ids == expected
    label = records(spark, SB_EXPLORER, [single], overrides).first()
    assert label is not None
    assert label["partition_key"] == "Service Bus Explorer"


@pytest.mark.connect
def test_a_damaged_file_is_one_corrupt_record(spark: Any, tmp_path: Path) -> None:
    good = _write(tmp_path / "orders.json", json.dumps(ARRAY))
    cut = _write(tmp_path / "payments.json", json.dumps(ARRAY)[:150])
    got = records(spark, SB_EXPLORER, [good, cut])
    every = got.collect()
    damaged = [r for r in every if r[CORRUPT] is not None]
    assert len(damaged) == 1
    assert damaged[0]["entity"] == "payments"
    assert damaged[0]["message_id"] is None
    assert len(every) == len(ARRAY) + 1


def test_recognise() -> None:
    assert SB_EXPLORER.recognise("\ufeff" + SINGLE)
    assert SB_EXPLORER.recognise(json.dumps(ARRAY, indent=2))
    assert not SB_EXPLORER.recognise('{"resourceSpans": [{"scopeSpans": []}]}\n')
    assert not SB_EXPLORER.recognise("messageId,enqueuedTimeUtc\nm1,2026-11-03T21:00:00Z\n")
    query_api = {"tables": [{"rows": [[{"messageId": "m", "enqueuedTimeUtc": "t"}]]}]}
    assert not SB_EXPLORER.recognise(json.dumps(query_api))
    assert not SB_EXPLORER.recognise('{"tables": [{"name": "PrimaryResult"}]}')


def test_dotnet_time() -> None:
    assert dotnet_time(micros("2014-12-03T16:39:48.495847")) == "2014-12-03T16:39:48.495847Z"
    assert dotnet_time(micros("2014-12-03T16:39:48.5")) == "2014-12-03T16:39:48.5Z"
    assert dotnet_time(micros("2014-12-03T16:39:48")) == "2014-12-03T16:39:48Z"


@pytest.mark.connect
def test_round_trip_gives_the_same_sends_and_verdicts(spark: Any, tmp_path: Path) -> None:
    generated = generate_telemetry(spark, 3_000, seed=4)
    entity = generated.groupBy("entity").count().orderBy(F.desc("count")).first()
    assert entity is not None
    typed = canonical(generated.where(F.col("entity") == entity[0]))
    one = typed.where(F.col("send_time").isNotNull()).persist()
    path = tmp_path / f"{entity[0]}.json.gz"
    write_sb_explorer(one, str(path))
    back = sends(records(spark, SB_EXPLORER, [path])).persist()
    columns = ("message_id", "entity", "partition_key", "session_id")
    times = ("send_time", "scheduled_enqueue_time")
    assert rows(back, *columns, *times) == rows(one, *columns, *times)

    policy = DedupPolicy("PT10M", partitioning=True)
    verdicts = ("message_id", "send_time", "verdict")
    replayed = detect_duplicates(back, policy)
    assert rows(replayed, *verdicts) == rows(detect_duplicates(one, policy), *verdicts)
    assert replayed.where("verdict = 'duplicate'").count() > 0


def test_write_refuses_several_entities(spark: Any, tmp_path: Path) -> None:
    generated = generate_telemetry(spark, 2_000, seed=4)
    with pytest.raises(InputError, match="one file per entity"):
        write_sb_explorer(generated, str(tmp_path / "all.json"))
