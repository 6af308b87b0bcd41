"""format="otlp": spans as the Azure SDKs and docs/instrumentation.md write them, the send
rule, the link join, the tally with skipped records, and the writer's round trip."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, detect_duplicates, generate_telemetry, load_telemetry
from dedup_lib.errors import InputError
from dedup_lib.synth.exports import write_otlp
from dedup_lib.telemetry.formats import RECORD_FORMATS
from dedup_lib.telemetry.formats.otlp import OTLP
from dedup_lib.telemetry.schema import CANONICAL_COLUMNS
from dedup_lib.telemetry.write import write_telemetry
from telemetry.load_kit import assert_reasons_counted_alike

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z
PY_TRACE = "0af7651916cd43dd8448eb211c80319c"
NET_TRACE = "4BF92F3577B34DA6A3CE929D0E0E4736"  # upper case: ids are matched ignoring case
OLD_TRACE = "5b8efff798038103d269b633813fc60c"


def ns(seconds: float) -> str:
    return str(round(seconds * 10**6) * 1000)


def attr(key: str, value: object) -> dict[str, object]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def span(
    trace: str,
    span_id: str,
    name: str,
    kind: int | str,
    start: float,
    end: float,
    attributes: dict[str, object],
    links: list[str] | None = None,
    parent: str = "",
) -> dict[str, object]:
    body: dict[str, object] = {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": ns(start),
        "endTimeUnixNano": ns(end),
        "attributes": [attr(k, v) for k, v in attributes.items()],
        "status": {},
    }
    if links:
        body["links"] = [{"traceId": trace, "spanId": s} for s in links]
    return body


def traces(service: str, scope: str, spans: list[dict[str, object]]) -> str:
    resource = {"attributes": [attr("service.name", service)]}
    data = {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": {"name": scope}, "spans": spans}]}
        ]
    }
    return json.dumps(data)


SB = {"az.namespace": "Microsoft.ServiceBus", "messaging.system": "servicebus"}


def python_app_line() -> str:
    """A Flask request that sends one message with the guide's own PRODUCER span (the SDK's
    message and send spans under it, without MessageId), then a batch of two whose message
    spans carry the ids; the SDK's send span links to them."""
    t = T0 + 1
    return traces(
        "orders-api",
        "azure.servicebus",
        [
            span(PY_TRACE, "a000000000000001", "POST /orders", 2, t, t + 1, {"http.route": "/o"}),
            span(
                PY_TRACE,
                "a000000000000002",
                "send orders",
                4,
                t + 0.1,
                t + 0.12,
                {
                    **SB,
                    "messaging.operation.type": "send",
                    "messaging.destination.name": "orders",
                    "messaging.message.id": "order-1",
                    "servicebus.message.id": "order-1",
                    "servicebus.message.partition_key": "cust-7",
                },
                parent="a000000000000001",
            ),
            span(
                PY_TRACE,
                "a000000000000003",
                "ServiceBus.message",
                4,
                t + 0.101,
                t + 0.101,
                {**SB, "messaging.destination.name": "orders"},
                parent="a000000000000002",
            ),
            span(
                PY_TRACE,
                "a000000000000004",
                "ServiceBus.send",
                3,
                t + 0.102,
                t + 0.119,
                {**SB, "messaging.operation": "publish", "message_bus.destination": "orders"},
                links=["a000000000000003"],
                parent="a000000000000002",
            ),
            span(
                PY_TRACE,
                "a000000000000005",
                "ServiceBus.message",
                4,
                t + 0.2,
                t + 0.2,
                {**SB, "messaging.destination.name": "orders", "messaging.message.id": "order-2"},
            ),
            span(
                PY_TRACE,
                "a000000000000006",
                "ServiceBus.message",
                4,
                t + 0.21,
                t + 0.21,
                {**SB, "messaging.destination.name": "orders", "messaging.message.id": "order-3"},
            ),
            span(
                PY_TRACE,
                "a000000000000007",
                "ServiceBus.send",
                3,
                t + 0.22,
                t + 0.250123,
                {
                    **SB,
                    "messaging.operation": "publish",
                    "message_bus.destination": "orders",
                    "messaging.batch.message_count": 2,
                },
                links=["a000000000000005", "a000000000000006"],
            ),
        ],
    )


def dotnet_line() -> str:
    """.NET: kinds as enum names, the id only under the servicebus.* copy, the entity only on
    the send call, and a receive span that links to the message (not a send call)."""
    t = T0 + 2
    return traces(
        "payments",
        "Azure.Messaging.ServiceBus.ServiceBusSender",
        [
            span(
                NET_TRACE,
                "B000000000000001",
                "Message",
                "SPAN_KIND_PRODUCER",
                t,
                t,
                {
                    "az.namespace": "Microsoft.ServiceBus",
                    "servicebus.message.id": "net-1",
                    "servicebus.message.session_id": "s1",
                },
            ),
            span(
                NET_TRACE,
                "B000000000000002",
                "ServiceBusSender.Send",
                "SPAN_KIND_CLIENT",
                t + 0.001,
                t + 0.0305,
                {**SB, "messaging.operation": "publish", "messaging.destination.name": "payments"},
                links=["b000000000000001"],
            ),
            span(
                NET_TRACE,
                "B000000000000003",
                "ServiceBusReceiver.Receive",
                "SPAN_KIND_CLIENT",
                t + 5,
                t + 5.1,
                {**SB, "messaging.operation": "receive", "messaging.destination.name": "x"},
                links=["b000000000000001"],
            ),
        ],
    )


def legacy_line() -> str:
    """The older system name and destination key, a scheduled message, no send call."""
    t = T0 + 3
    return traces(
        "legacy-export",
        "azure.servicebus",
        [
            span(
                OLD_TRACE,
                "c000000000000001",
                "ServiceBus.message",
                4,
                t,
                t,
                {
                    "messaging.system": "azure_servicebus",
                    "message_bus.destination": "legacy",
                    "messaging.message.id": "old-1",
                    "servicebus.message.scheduled_enqueue_time": "2023-11-14T23:00:00+00:00",
                },
            ),
        ],
    )


def sample(path: Path) -> Path:
    lines = [
        python_app_line(),
        dotnet_line(),
        "{not json at all",
        legacy_line(),
        json.dumps({"resourceLogs": [{"scopeLogs": []}]}),
    ]
    content = ("\n".join(lines) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(content) if path.name.endswith(".gz") else content)
    return path


def micros(seconds: float) -> int:
    return round(seconds * 10**6)


def by_id(loaded: Any, *columns: str) -> dict[str, tuple[object, ...]]:
    rows = loaded.valid.select("message_id", *columns).collect()
    return {r[0]: tuple(r[1:]) for r in rows}


def test_it_is_registered_and_recognises_only_traces() -> None:
    assert RECORD_FORMATS["otlp"] is OTLP
    assert OTLP.recognise("\ufeff" + python_app_line())
    assert not OTLP.recognise('{"message_id": "a", "send_time": 1}\n')
    assert not OTLP.recognise("message_id,send_time\nresourceSpans,1\n")


@pytest.mark.connect
def test_sends_are_message_spans_and_the_rest_is_skipped_with_reasons(
    spark: Any, tmp_path: Path
) -> None:
    loaded = load_telemetry(spark, str(sample(tmp_path / "traces.json")), format="otlp")

    assert loaded.format == "otlp"
    assert loaded.counts() == {"read": 13, "valid": 5, "quarantined": 1, "skipped": 7}
    row = loaded.files.iloc[0]
    assert row["read"] == row["valid"] + row["quarantined"] + row["skipped"]
    assert loaded.not_sends is not None
    assert loaded.not_sends.count() == 7
    table = loaded.not_send_reasons()
    reasons = dict(zip(table["reason"], table["count"], strict=True))
    assert reasons == {
        "Service Bus send call (its messages are counted)": 3,
        "not a Service Bus span": 1,
        "SDK message span; the application's span in its trace has the MessageId": 1,
        "Service Bus span, not a message send": 1,
        "JSON line without resourceSpans (not OTLP traces)": 1,
    }
    assert loaded.quarantine_reasons()["reason"].tolist() == ["malformed otlp line"]
    assert_reasons_counted_alike(loaded)

    got = by_id(
        loaded,
        F.unix_micros("send_time"),
        "entity",
        "partition_key",
        "session_id",
        "batch_id",
        "send_span_id",
        "service_name",
    )
    assert got == {
        "order-1": (micros(T0 + 1.1), "orders", "cust-7", None, None, None, "orders-api"),
        "order-2": (
            micros(T0 + 1.250123),
            "orders",
            None,
            None,
            "a000000000000007",
            "a000000000000007",
            "orders-api",
        ),
        "order-3": (
            micros(T0 + 1.250123),
            "orders",
            None,
            None,
            "a000000000000007",
            "a000000000000007",
            "orders-api",
        ),
        "net-1": (
            micros(T0 + 2.0305),
            "payments",
            None,
            "s1",
            "b000000000000002",
            "b000000000000002",
            "payments",
        ),
        "old-1": (micros(T0 + 3), "legacy", None, None, None, None, "legacy-export"),
    }
    scheduled = by_id(loaded, F.unix_micros("scheduled_enqueue_time"))
    assert scheduled["old-1"] == (int(datetime(2023, 11, 14, 23, tzinfo=UTC).timestamp() * 10**6),)


@pytest.mark.connect
def test_gzip_and_the_format_recognised_from_the_content(spark: Any, tmp_path: Path) -> None:
    loaded = load_telemetry(spark, str(sample(tmp_path / "traces.json.gz")))
    assert loaded.format == "otlp"
    assert loaded.counts() == {"read": 13, "valid": 5, "quarantined": 1, "skipped": 7}


def test_sends_without_any_message_id_are_an_error_that_says_where_it_looked(
    spark: Any, tmp_path: Path
) -> None:
    t = T0
    line = traces(
        "orders-api",
        "azure.servicebus",
        [
            span(
                PY_TRACE,
                "d000000000000001",
                "ServiceBus.message",
                4,
                t,
                t,
                {**SB, "messaging.destination.name": "orders"},
            ),
            span(
                PY_TRACE,
                "d000000000000002",
                "ServiceBus.send",
                3,
                t,
                t + 0.01,
                {**SB, "messaging.operation": "publish"},
                links=["d000000000000001"],
            ),
        ],
    )
    path = tmp_path / "sdk-only.json"
    path.write_text(line + "\n")
    with pytest.raises(InputError) as info:
        load_telemetry(spark, str(path), format="otlp")
    message = str(info.value)
    assert "sdk-only.json has 1 otlp send(s) but none carries a MessageId" in message
    assert "'messaging.message.id'" in message
    assert "mapping={'<your key>': 'message_id'}" in message
    assert "docs/instrumentation.md" in message


def test_the_mapping_names_the_keys_read(spark: Any, tmp_path: Path) -> None:
    t = T0
    line = traces(
        "orders-api",
        "my.app",
        [
            span(
                PY_TRACE,
                "e000000000000001",
                "send orders",
                4,
                t,
                t,
                {
                    **SB,
                    "messaging.destination.name": "orders",
                    "app.message_id": "x-1",
                    "messaging.message.id": "ignored",
                    "app.pk": "p-1",
                    "tenant": "acme",
                },
            ),
        ],
    )
    path = tmp_path / "mapped.json"
    path.write_text(line + "\n")
    mapping = {"app.message_id": "message_id", "app.pk": "partition_key", "tenant": "tenant"}
    loaded = load_telemetry(spark, str(path), format="otlp", mapping=mapping)
    assert by_id(loaded, "partition_key", "tenant") == {"x-1": ("p-1", "acme")}
    assert loaded.mapping["app.message_id"] == "message_id"
    with pytest.raises(InputError, match="mapping reads message_id from 'a' and 'b'"):
        load_telemetry(
            spark, str(path), format="otlp", mapping={"a": "message_id", "b": "message_id"}
        )


def test_an_attribute_is_its_first_entry_as_text_else_the_resources(
    spark: Any, tmp_path: Path
) -> None:
    """A key given twice is read from its first entry; a number's value as its text; a key
    the span lacks from the resource; a key neither has is null."""
    t = T0
    twice = span(
        PY_TRACE, "a000000000000001", "send", 4, t, t, {**SB, "messaging.message.id": "first"}
    )
    twice["attributes"] += [attr("messaging.message.id", "second"), attr("tenant", 7)]
    bare = span(
        PY_TRACE, "a000000000000002", "send", 4, t, t, {**SB, "messaging.message.id": "bare"}
    )
    data = json.loads(traces("orders-api", "my.app", [twice, bare]))
    data["resourceSpans"][0]["resource"]["attributes"] += [
        attr("messaging.destination.name", "from-resource"),
        attr("tenant", "resource-tenant"),
    ]
    path = tmp_path / "attributes.json"
    path.write_text(json.dumps(data) + "\n")
    mapping = {"tenant": "tenant", "region": "region"}
    loaded = load_telemetry(spark, str(path), format="otlp", mapping=mapping)
    assert by_id(loaded, "entity", "tenant", "region") == {
        "first": ("from-resource", "7", None),
        "bare": ("from-resource", "resource-tenant", None),
    }


def test_entity_fills_spans_that_name_none_and_never_replaces_one(
    spark: Any, tmp_path: Path
) -> None:
    t = T0
    line = traces(
        "orders-api",
        "my.app",
        [
            span(
                PY_TRACE,
                "f000000000000001",
                "send",
                4,
                t,
                t,
                {**SB, "messaging.message.id": "named", "messaging.destination.name": "orders"},
            ),
            span(
                PY_TRACE,
                "f000000000000002",
                "send",
                4,
                t,
                t,
                {**SB, "messaging.message.id": "bare"},
            ),
        ],
    )
    path = tmp_path / "entity.json"
    path.write_text(line + "\n")
    loaded = load_telemetry(spark, str(path), format="otlp", entity="fallback")
    assert by_id(loaded, "entity") == {"named": ("orders",), "bare": ("fallback",)}


def test_written_traces_replay_exactly_like_the_same_sends_from_parquet(
    spark: Any, tmp_path: Path
) -> None:
    sends = generate_telemetry(spark, 3_000, seed=5)
    write_telemetry(sends, str(tmp_path / "sends.parquet"), single_file=True)
    write_otlp(sends, str(tmp_path / "traces.json.gz"))
    lines = gzip.decompress((tmp_path / "traces.json.gz").read_bytes()).decode().splitlines()
    assert all(json.loads(line)["resourceSpans"] for line in lines)

    parquet = load_telemetry(spark, str(tmp_path / "sends.parquet"))
    otlp = load_telemetry(spark, str(tmp_path / "traces.json.gz"))
    assert otlp.format == "otlp"
    sent = parquet.counts()
    # a message whose time does not parse is written in a send call of its own
    unparsed = F.col("reason").startswith("unparseable send_time")
    alone = {r[0] for r in parquet.quarantine.where(unparsed).select("event_id").collect()}
    table = sends.select("entity", "batch_id", "event_id").toPandas()
    table.loc[table["event_id"].isin(alone), "batch_id"] = None
    batched = table.dropna(subset=["batch_id"])[["entity", "batch_id"]]
    calls = len(table) - len(batched) + len(batched.drop_duplicates())
    assert len(batched) > 0
    assert calls < len(table)
    assert otlp.counts() == {
        "read": sent["read"] + calls * 2,  # a span per message, a send call and an HTTP request
        "valid": sent["valid"],
        "quarantined": sent["quarantined"],
        "skipped": calls * 2,
    }
    quarantined = {r[0] for r in otlp.quarantine.select("event_id").collect()}
    assert quarantined == {r[0] for r in parquet.quarantine.select("event_id").collect()}

    columns = [c for c in CANONICAL_COLUMNS if c not in ("event_id", "batch_id")]
    verdicts = ["verdict", "reason", "dedup_key", "original_event_id", "original_send_time"]
    policy = DedupPolicy("PT10M", partitioning=True)
    want = detect_duplicates(parquet.valid, policy).select("event_id", *columns, *verdicts)
    got = detect_duplicates(otlp.valid, policy).select("event_id", *columns, *verdicts)
    assert want.count() == got.count() == sent["valid"]
    assert want.exceptAll(got).count() == 0
    assert got.exceptAll(want).count() == 0
    assert got.where("verdict = 'duplicate'").count() > 0


def test_a_batch_is_one_send_call(spark: Any, tmp_path: Path) -> None:
    at = datetime(2026, 11, 3, 21, 0, 0, 123456, tzinfo=UTC)
    frame = spark.createDataFrame(
        [("a", at, "q", "b1", 1), ("b", at, "q", "b1", 2), ("c", at, "q", None, 3)],
        "message_id string, send_time timestamp, entity string, batch_id string, event_id long",
    )
    path = tmp_path / "batch.json"
    write_otlp(frame, str(path))
    loaded = load_telemetry(spark, str(path))
    got = by_id(loaded, "batch_id", "send_span_id", F.unix_micros("send_time"))
    assert got["a"][0] == got["b"][0] == "b1"
    assert got["a"][1] == got["b"][1] != got["c"][1]
    assert got["c"][0] == got["c"][1]  # a call of its own: its send span's id
    assert {v[2] for v in got.values()} == {int(at.timestamp() * 10**6)}
    assert loaded.counts()["skipped"] == 4  # two send calls, two HTTP requests


@pytest.mark.connect
def test_zstd_files_are_written_recognised_and_read(spark: Any, tmp_path: Path) -> None:
    at = datetime(2026, 11, 3, 21, 0, 0, 1, tzinfo=UTC)
    frame = spark.createDataFrame(
        [("a", at, "q", 1), ("b", at, "q", 2)],
        "message_id string, send_time timestamp, entity string, event_id long",
    )
    path = tmp_path / "traces.json.zst"
    write_otlp(frame, str(path))
    assert path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # the zstd frame's magic number
    loaded = load_telemetry(spark, str(path))
    assert loaded.format == "otlp"
    assert by_id(loaded, F.unix_micros("send_time")) == {
        "a": (int(at.timestamp() * 10**6),),
        "b": (int(at.timestamp() * 10**6),),
    }
