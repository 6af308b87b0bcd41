"""Application Insights exports: the portal's CSV (workspace and classic names), the query
API's JSON, which rows are sends and why the others are not, batch ids from span links, key
overrides, damaged files, and a round trip from the generator in both shapes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from codegen_kit import configured
from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry
from dedup_lib.columns import CORRUPT, NOT_SEND
from dedup_lib.errors import InputError
from dedup_lib.synth.exports.app_insights import portal_text, write_app_insights
from dedup_lib.telemetry.formats.app_insights import APP_INSIGHTS
from telemetry.formats.record_kit import canonical, micros, records, rows, sends

HOST = "contoso.servicebus.windows.net"
LINKS = json.dumps([{"operation_Id": "op1", "id": "m-1"}, {"operation_Id": "op1", "id": "m-2"}])


def _props(**values: str) -> str:
    """A JSON object as the portal quotes it in a CSV field."""
    return '"' + json.dumps(values).replace('"', '""') + '"'


WORKSPACE = "\r\n".join(
    [
        '"TimeGenerated [UTC]",Id,Target,DependencyType,Name,Success,Properties,OperationId,'
        "ParentId,AppRoleName",
        f'"5/25/2023, 4:32:49.469 AM",m-1,{HOST}/orders,"Queue Message | Azure Service Bus",'
        "Message,True,"
        + _props(MessageId="a", PartitionKey="p1", ScheduledEnqueueTimeUtc="2023-05-25T05:00:00Z")
        + ",op1,app1,checkout",
        f'"5/25/2023, 12:05:00.001 PM",m-2,{HOST}/orders,"Queue Message | Azure Service Bus",'
        "Message,True," + _props(MessageId="b", SessionId="s1") + ",op1,app1,checkout",
        f'"5/25/2023, 4:32:49.400 AM",c-1,{HOST}/orders,"Azure Service Bus",'
        'ServiceBusSender.Send,True,"{""_MS.links"": ' + LINKS.replace('"', '""') + '}",op1,app1,'
        "checkout",
        '"5/25/2023, 4:32:50.000 AM",h-1,api.contoso.com,HTTP,"GET /x",True,"{}",op2,app2,web',
        '"5/25/2023, 4:32:51.000 AM",q-1,"sql|db",SQL,query,True,,op3,app3,web',
        f'"2023-05-25T04:33:00.123456Z",m-3,{HOST}/eu/orders,"Queue Message | Azure Service Bus",'
        'Message,True,"{\n""MessageId"": ""c""}",op4,app4,checkout',
        f'"5/25/2023, 4:34:00.000 AM",m-4,{HOST}/orders,"Queue Message | Azure Service Bus",'
        'Message,True,"{not json",op5,app5,checkout',
    ]
)

CLASSIC = "\r\n".join(
    [
        '"timestamp [UTC]",id,target,type,name,customDimensions,operation_Id,'
        "operation_ParentId,cloud_RoleName",
        f'"11/3/2026, 9:00:00.250 PM",k-1,{HOST}/payments,"Queue Message | Microsoft.ServiceBus",'
        "ServiceBus.message," + _props(MessageId="x", BatchId="b-9") + ",op1,,billing",
        f'"11/3/2026, 9:00:00.200 PM",k-0,{HOST}/payments,Microsoft.ServiceBus,ServiceBus.send,'
        '"{}",op1,,billing',
    ]
)


def _response(*tables: tuple[list[str], list[list[Any]]]) -> str:
    return json.dumps(
        {
            "tables": [
                {
                    "name": "PrimaryResult",
                    "columns": [{"name": n, "type": "string"} for n in names],
                    "rows": table_rows,
                }
                for names, table_rows in tables
            ]
        },
        indent=1,
    )


QUERY_API = _response(
    (
        [
            "TimeGenerated",
            "Target",
            "DependencyType",
            "Properties",
            "Id",
            "OperationId",
            "ParentId",
        ],
        [
            # An application's own PRODUCER span with the keys of docs/instrumentation.md ...
            [
                "2026-11-03T21:00:00.1234567Z",
                "orders",
                "Queue Message | servicebus",
                json.dumps({"servicebus.message.id": "app-1", "servicebus.entity": "orders"}),
                "s-1",
                "t1",
                None,
            ],
            # ... and the SDK's message span under it, which carries no MessageId.
            [
                "2026-11-03T21:00:00.1300000Z",
                f"{HOST}/orders",
                "Queue Message | Microsoft.ServiceBus",
                None,
                "s-2",
                "t1",
                "s-1",
            ],
            [
                "2026-11-03T21:00:01Z",
                f"{HOST}/orders",
                "Queue Message | Azure Service Bus",
                {"MessageId": "obj-1", "PartitionKey": 7},
                "s-3",
                "t2",
                None,
            ],
        ],
    ),
    # A second table with its columns in another order.
    (
        ["DependencyType", "timestamp", "customDimensions", "target", "id"],
        [
            [
                "Queue Message | Azure Service Bus",
                "2026-11-03T21:00:02Z",
                '{"MessageId": "t2"}',
                f"{HOST}/q2",
                "s-4",
            ]
        ],
    ),
)


def _write(path: Path, text: str, *, bom: bool = False) -> Path:
    data = (("\ufeff" if bom else "") + text).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _by_dependency(frame: Any) -> dict[str, Any]:
    return {r["dependency_id"]: r for r in frame.collect()}


@pytest.mark.connect
def test_workspace_csv_with_bom(spark: Any, tmp_path: Path) -> None:
    got = _by_dependency(
        records(spark, APP_INSIGHTS, [_write(tmp_path / "d.csv", WORKSPACE, bom=True)])
    )
    assert set(got) == {"m-1", "m-2", "c-1", "h-1", "q-1", "m-3", "m-4"}
    first = got["m-1"]
    assert (first["message_id"], first["entity"], first["partition_key"]) == ("a", "orders", "p1")
    assert (first["operation_id"], first["parent_id"], first["app_role"]) == (
        "op1",
        "app1",
        "checkout",
    )
    assert first[NOT_SEND] is None
    assert first[CORRUPT] is None
    assert got["m-2"]["session_id"] == "s1"
    assert got["m-1"]["batch_id"] == got["m-2"]["batch_id"] == "c-1"
    assert got["m-3"]["message_id"] == "c"
    assert got["m-3"]["entity"] == "eu/orders"
    assert got["m-3"]["batch_id"] is None
    assert got["m-4"][CORRUPT].startswith("Properties is not a JSON object: '{not json")
    assert got["m-4"][NOT_SEND] is None
    assert "is a Service Bus call" in got["c-1"][NOT_SEND]
    assert got["h-1"][NOT_SEND] == "dependency type 'HTTP' is not a Service Bus message"
    assert got["q-1"][NOT_SEND] == "dependency type 'SQL' is not a Service Bus message"
    assert got["q-1"][CORRUPT] is None

    parsed = sends(records(spark, APP_INSIGHTS, [tmp_path / "d.csv"]))
    assert rows(parsed, "message_id", "send_time", "scheduled_enqueue_time") == [
        ("a", micros("2023-05-25T04:32:49.469"), micros("2023-05-25T05:00:00")),
        ("b", micros("2023-05-25T12:05:00.001"), None),
        ("c", micros("2023-05-25T04:33:00.123456"), None),
    ]


@pytest.mark.connect
def test_classic_csv_names(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "classic.csv.gz", CLASSIC)
    got = _by_dependency(records(spark, APP_INSIGHTS, [path]))
    assert got["k-1"]["message_id"] == "x"
    assert got["k-1"]["entity"] == "payments"
    assert got["k-1"]["batch_id"] == "b-9"
    assert got["k-1"]["app_role"] == "billing"
    assert "'Microsoft.ServiceBus' is a Service Bus call" in got["k-0"][NOT_SEND]
    parsed = sends(records(spark, APP_INSIGHTS, [path]))
    assert rows(parsed, "send_time") == [(micros("2026-11-03T21:00:00.250"),)]


@pytest.mark.connect
def test_query_api_json(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "result.json", QUERY_API)
    got = _by_dependency(records(spark, APP_INSIGHTS, [path]))
    assert set(got) == {"s-1", "s-2", "s-3", "s-4"}
    assert (got["s-1"]["message_id"], got["s-1"]["entity"], got["s-1"][NOT_SEND]) == (
        "app-1",
        "orders",
        None,
    )
    assert (
        got["s-2"][NOT_SEND]
        == "the SDK's row of a message whose application row (Id 's-1') records it"
    )
    assert (got["s-3"]["message_id"], got["s-3"]["partition_key"]) == ("obj-1", "7")
    assert (got["s-4"]["message_id"], got["s-4"]["entity"]) == ("t2", "q2")
    parsed = sends(records(spark, APP_INSIGHTS, [path]))
    assert rows(parsed, "message_id", "send_time") == [
        ("app-1", micros("2026-11-03T21:00:00.123456")),
        ("obj-1", micros("2026-11-03T21:00:01")),
        ("t2", micros("2026-11-03T21:00:02")),
    ]


def test_keys_can_name_properties_and_columns(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "d.csv", WORKSPACE)
    overrides = {"message_id": "PartitionKey", "partition_key": "AppRoleName", "entity": "Name"}
    got = _by_dependency(records(spark, APP_INSIGHTS, [path], overrides))
    assert (got["m-1"]["message_id"], got["m-1"]["partition_key"], got["m-1"]["entity"]) == (
        "p1",
        "checkout",
        "Message",
    )
    assert got["m-2"]["message_id"] is None
    json_path = _write(tmp_path / "r.json", QUERY_API)
    by_column = _by_dependency(
        records(spark, APP_INSIGHTS, [json_path], {"message_id": "OperationId"})
    )
    assert by_column["s-3"]["message_id"] == "t2"
    assert by_column["s-4"]["message_id"] is None


def test_entity_argument_fills_targets_without_one(spark: Any, tmp_path: Path) -> None:
    text = CLASSIC.replace(f"{HOST}/payments", HOST)
    got = _by_dependency(
        records(spark, APP_INSIGHTS, [_write(tmp_path / "c.csv", text)], entity="fallback")
    )
    assert got["k-1"]["entity"] == "fallback"


@pytest.mark.connect
def test_damaged_files(spark: Any, tmp_path: Path) -> None:
    cut = _write(tmp_path / "cut.json", QUERY_API[:200])
    got = records(spark, APP_INSIGHTS, [cut, _write(tmp_path / "ok.json", QUERY_API)]).collect()
    damaged = [r for r in got if r[CORRUPT] is not None]
    assert len(damaged) == 1
    assert damaged[0]["source_file"].endswith("cut.json")
    assert damaged[0][NOT_SEND] is None
    assert len(got) == 5

    lines = CLASSIC.split("\r\n")
    broken = _write(tmp_path / "broken.csv", "\r\n".join([*lines, lines[1] + ",extra,cells"]))
    rows_read = records(spark, APP_INSIGHTS, [broken]).collect()
    assert len(rows_read) == 3
    assert sum(r[CORRUPT] is not None for r in rows_read) == 1


def test_local_times_and_mixed_shapes_are_errors(spark: Any, tmp_path: Path) -> None:
    local = _write(
        tmp_path / "local.csv", CLASSIC.replace("timestamp [UTC]", "timestamp [Local Time]")
    )
    with pytest.raises(InputError, match=r"local\.csv has times in local time"):
        records(spark, APP_INSIGHTS, [local])
    both = [_write(tmp_path / "a.csv", CLASSIC), _write(tmp_path / "b.json", QUERY_API)]
    with pytest.raises(InputError, match="mix the portal's CSV and the query API's JSON"):
        records(spark, APP_INSIGHTS, both)


def test_recognise() -> None:
    assert APP_INSIGHTS.recognise("\ufeff" + WORKSPACE)
    assert APP_INSIGHTS.recognise(CLASSIC)
    assert APP_INSIGHTS.recognise(QUERY_API)
    assert not APP_INSIGHTS.recognise("message_id,send_time\nm1,2026-11-03T21:00:00Z\n")
    assert not APP_INSIGHTS.recognise('{"messageId": "m", "enqueuedTimeUtc": "2026"}')
    assert not APP_INSIGHTS.recognise('{"resourceSpans": []}\n')
    assert not APP_INSIGHTS.recognise('[\r\n  {\r\n    "messageId": "m",')


def test_portal_text() -> None:
    assert portal_text(micros("2023-05-25T04:32:49.469999")) == "5/25/2023, 4:32:49.469 AM"
    assert portal_text(micros("2023-05-25T00:00:00")) == "5/25/2023, 12:00:00.000 AM"
    assert portal_text(micros("2023-12-05T23:02:03.5")) == "12/5/2023, 11:02:03.500 PM"


def _partition(groups: Any) -> list[list[tuple[Any, ...]]]:
    return sorted((sorted(group, key=repr) for group in groups), key=repr)


@pytest.fixture(scope="module")
def generated(spark: Any) -> Any:
    """Generated sends with a time, some in batches (up to three sends of an entity)."""
    sends_ = generate_telemetry(spark, 2_000, seed=6)
    batch = F.when(
        F.col("event_id") % 7 < 3, F.concat(F.lit("batch-"), F.floor(F.col("event_id") / 7))
    )
    typed = canonical(sends_.withColumn("batch_id", batch.cast("string")))
    return typed.where(F.col("send_time").isNotNull()).persist()


@pytest.mark.parametrize("name", ["export.csv.gz", "result.json"])
def test_round_trip(spark: Any, tmp_path: Path, generated: Any, name: str) -> None:
    path = tmp_path / name
    write_app_insights(generated, str(path))
    if name.endswith(".csv.gz"):
        assert gzip.decompress(path.read_bytes()).startswith('\ufeff"TimeGenerated [UTC]"'.encode())
    read = records(spark, APP_INSIGHTS, [path]).persist()
    kinds = {r[0]: r[1] for r in read.groupBy(F.col(NOT_SEND).isNull()).count().collect()}
    assert kinds[True] == generated.count()
    assert kinds[False] > generated.count() // 25
    back = sends(read)
    # The portal's CSV keeps milliseconds; the query API's JSON, microseconds.
    truncate = name.endswith(".csv.gz")
    original = generated.withColumn(
        "send_time",
        F.date_trunc("millisecond", "send_time") if truncate else F.col("send_time"),
    )
    columns = ("message_id", "entity", "partition_key", "session_id", "send_time")
    assert rows(back, *columns, "scheduled_enqueue_time") == rows(
        original, *columns, "scheduled_enqueue_time"
    )
    same_batch = rows(back, "message_id", "send_time", "batch_id")
    groups: dict[str, set[tuple[Any, ...]]] = {}
    for message_id, send_time, batch_id in same_batch:
        groups.setdefault(batch_id, set()).add((message_id, send_time))
    expected: dict[tuple[Any, ...], set[tuple[Any, ...]]] = {}
    for message_id, send_time, entity, batch_id, event_id in rows(
        original, "message_id", "send_time", "entity", "batch_id", "event_id"
    ):
        call = (entity, batch_id) if batch_id is not None else (event_id,)
        expected.setdefault(call, set()).add((message_id, send_time))
    assert _partition(groups.values()) == _partition(expected.values())

    policy = DedupPolicy("PT10M", partitioning=True)
    verdicts = ("message_id", "entity", "send_time", "verdict")
    assert rows(detect_duplicates(back, policy), *verdicts) == rows(
        detect_duplicates(original, policy), *verdicts
    )


def test_write_refuses_a_send_without_time(spark: Any, tmp_path: Path, generated: Any) -> None:
    timeless = generated.limit(3).withColumn("send_time", F.lit(None).cast("timestamp"))
    path = tmp_path / "x.json"
    with pytest.raises(InputError, match=r"has no parseable send_time, which .*x\.json cannot"):
        write_app_insights(timeless, str(path))
    assert not path.exists()


@pytest.mark.connect
def test_portal_times_ignore_the_session_time_zone(spark: Any, tmp_path: Path) -> None:
    path = _write(tmp_path / "classic.csv", CLASSIC)
    with configured(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        got = rows(sends(records(spark, APP_INSIGHTS, [path])), "send_time")
    assert got == [(micros("2026-11-03T21:00:00.250"),)]
