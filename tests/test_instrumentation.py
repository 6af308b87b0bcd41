"""docs/instrumentation.md's Python blocks run, in order, in one namespace and a fresh folder, as
the sending application they are fragments of: real ``azure-servicebus`` clients, senders and
messages, with only the senders' AMQP links stood in for (:mod:`servicebus_kit`), and the
OpenTelemetry SDK keeping the spans in memory. The names the page says come from the reader's
application (``client``, ``conn_str``, ``body``, ``order_id``, ``customer_id``, ``msgs``,
``m1``..``m4``, and the log block's ``sender``: section 3's ``with`` closed the one before) are
given; ``record`` is the shipped ``dedup_lib/recorder.py`` copied into the folder, as the page
tells users to do (that it imports nothing but the standard library:
``test_recorder.py::test_the_file_stands_alone``).

The log block runs twice, as in the page's lost acknowledgement: the send raises, the code
retries the same messages. What the blocks wrote is then read as the page says it is read: the
spans as the Collector's ``file`` exporter writes them (OTLP JSON) and the recorded and logged
JSON Lines, each with ``load_telemetry``; the MessageIds in all three are the ids the SDK put
on the wire.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import OperationTimeoutError
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pyspark.sql import functions as F

from dedup_lib import load_telemetry, recorder
from pages_kit import BLOCK, ROOT
from servicebus_kit import CONNECTION, stand_in_links

GUIDE = ROOT / "docs" / "instrumentation.md"
SCHEDULED = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Where the blocks' spans end: ``trace.get_tracer`` finds this provider (the process's
    global one can be set only once, so it is left alone)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "myapp"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    yield exporter
    provider.shutdown()


@pytest.fixture
def send_log(tmp_path: Path) -> Iterator[Path]:
    """The log block's logger routed as the page says: a file of its own (beside the recorded
    one, in ``sends/``), the message text only."""
    path = tmp_path / "sends" / "orders-log-host1.jsonl"
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("servicebus.sends")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(level)


@pytest.fixture
def copied_recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``record.py`` in the folder, importable: the shipped recorder module, copied."""
    copy = tmp_path / "record.py"
    shutil.copy(recorder.__file__, copy)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "record", raising=False)
    yield copy
    sys.modules.pop("record", None)


def _value(value: object) -> dict[str, object]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _attributes(attributes: Any) -> list[dict[str, object]]:
    return [{"key": k, "value": _value(v)} for k, v in (attributes or {}).items()]


def otlp_line(spans: Sequence[ReadableSpan]) -> str:
    """The spans as one line of the Collector's ``file`` exporter: a ``TracesData`` in OTLP
    JSON (ids in hex, times in nanoseconds as text, the protocol's kind numbers)."""
    scopes: dict[str, list[dict[str, object]]] = {}
    for span in spans:
        context = span.get_span_context()
        assert context is not None
        scope = span.instrumentation_scope.name if span.instrumentation_scope else ""
        scopes.setdefault(scope, []).append(
            {
                "traceId": f"{context.trace_id:032x}",
                "spanId": f"{context.span_id:016x}",
                "parentSpanId": f"{span.parent.span_id:016x}" if span.parent else "",
                "name": span.name,
                "kind": span.kind.value + 1,  # the API's INTERNAL is 0, the protocol's 1
                "startTimeUnixNano": str(span.start_time),
                "endTimeUnixNano": str(span.end_time),
                "attributes": _attributes(span.attributes),
                "status": {"code": span.status.status_code.value},
            }
        )
    resource = spans[0].resource.attributes
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": _attributes(resource)},
                    "scopeSpans": [
                        {"scope": {"name": name}, "spans": listed}
                        for name, listed in scopes.items()
                    ],
                }
            ]
        }
    )


def _application(client: ServiceBusClient) -> dict[str, Any]:
    """The names the page's blocks take from the reader's application."""
    return {
        "client": client,
        "conn_str": CONNECTION,
        "body": '{"order": 1042}',
        "order_id": "order-1042",
        "customer_id": "cust-7",
        "msgs": [
            ServiceBusMessage('{"order": 1043}', message_id="order-1043", partition_key="c-8"),
            ServiceBusMessage('{"order": 1044}', message_id="order-1044", session_id="s-1"),
            ServiceBusMessage(
                '{"remind": 1042}', message_id="remind-1042", scheduled_enqueue_time_utc=SCHEDULED
            ),
        ],
        "m1": ServiceBusMessage("m1"),  # no MessageId: ServiceBusMessage fills in a GUID
        "m2": ServiceBusMessage("m2", message_id="order-1046"),
        "m3": ServiceBusMessage("m3", message_id="order-1047", partition_key="cust-9"),
        "m4": ServiceBusMessage("m4", message_id="remind-1048"),
    }


def _micros(moment: datetime) -> int:
    return round(moment.timestamp() * 1_000_000)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _verdicts(result: Any) -> list[tuple[str, str, str]]:
    return sorted((r.message_id, r.outcome, r.verdict) for r in result.collect())


def test_the_python_blocks_of_the_instrumentation_guide_run(
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spans: InMemorySpanExporter,
    send_log: Path,
    copied_recorder: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = BLOCK.findall(GUIDE.read_text())
    assert len(blocks) == 5, "a block was added or removed: give it its part below"
    # a traced send, a traced batch, record_sends, loading what it wrote, a log line per send
    traced, traced_batch, recorded, loading, logged = blocks
    links = stand_in_links(monkeypatch)
    namespace: dict[str, Any] = {"__name__": "__example__"}

    def run(block: str) -> None:
        exec(compile(block, f"{GUIDE.name}, block {blocks.index(block)}", "exec"), namespace)

    # retry_total=0, as the page advises: a failed send reaches the code that logs it
    with ServiceBusClient.from_connection_string(CONNECTION, retry_total=0) as client:
        namespace.update(_application(client))
        msg_ids = [m.message_id for m in namespace["msgs"]]

        # 1. Attributes on your own span: one send, then a batch
        run(traced)
        run(traced_batch)
        traced_link = links[0]
        assert traced_link.sends == [["order-1042"], msg_ids]
        batch_id = namespace["batch_id"]
        finished = spans.get_finished_spans()
        assert [s.name for s in finished] == ["send orders"] + ["create orders"] * 3 + [
            "send orders"
        ]

        # 3. record_sends, from the copied file
        run(recorded)
        assert namespace["record_sends"].__module__ == "record"
        assert sys.modules["record"].__file__ == str(copied_recorder)
        recorded_link = links[1]
        sent = [i for ids in recorded_link.sends for i in ids]
        given = [namespace[m].message_id for m in ("m1", "m2", "m3", "m4")]
        assert sent == ["order-1042", *given]
        rows = _lines(tmp_path / "sends" / "orders-host1.jsonl")
        assert [r["message_id"] for r in rows] == sent
        assert rows[1]["batch_id"] == rows[2]["batch_id"] != rows[3]["batch_id"]
        assert rows[3]["partition_key"] == "cust-9"
        assert rows[4]["scheduled_enqueue_time"] == "2026-11-24T06:00:00.000000Z"
        assert rows[4]["sequence_number"] == 1000
        assert {r["outcome"] for r in rows} == {"sent"}

        # ... loaded with dedup_lib, on this run's session
        run(loading)
        assert namespace["spark"] is spark
        assert namespace["loaded"].counts() == {
            "read": 5,
            "valid": 5,
            "quarantined": 0,
            "skipped": 0,
        }
        assert _verdicts(namespace["result"]) == sorted((i, "sent", "accepted") for i in sent)

        # 4. A log line per message, from code that cannot wrap its sender: the send's
        # acknowledgement is lost, the code retries the same messages
        namespace["sender"] = client.get_queue_sender(queue_name="orders")  # not the closed one
        log_link = links[2]
        log_link.failures.append(OperationTimeoutError(message="Send timed out"))
        with pytest.raises(OperationTimeoutError):
            run(logged)
        run(logged)
        assert log_link.sends == [msg_ids, msg_ids]
        logged_rows = _lines(send_log)
        assert [r["message_id"] for r in logged_rows] == msg_ids * 2
        assert [r["outcome"] for r in logged_rows] == ["OperationTimeoutError"] * 3 + ["sent"] * 3
        assert logged_rows[0]["error"] == "Send timed out"
        assert logged_rows[0]["batch_id"] != logged_rows[3]["batch_id"]
        assert logged_rows[2]["scheduled_enqueue_time"] == "2026-11-24T06:00:00+00:00"

        # ... read with the recorded lines, as the loading block reads the folder
        run(loading)
        assert namespace["loaded"].counts()["valid"] == 11
        failed = [(i, "OperationTimeoutError", "accepted") for i in msg_ids]
        retried = [(i, "sent", "duplicate") for i in msg_ids]
        assert _verdicts(namespace["result"]) == sorted(
            [(i, "sent", "accepted") for i in sent] + failed + retried
        )

    # the spans of section 1, as the Collector writes them, read by format="otlp"
    traces = tmp_path / "traces" / "spans.jsonl"
    traces.parent.mkdir()
    traces.write_text(otlp_line(finished) + "\n")
    loaded = load_telemetry(spark, str(traces), format="otlp")
    assert loaded.counts() == {"read": 5, "valid": 4, "quarantined": 0, "skipped": 1}
    columns = ["message_id", "entity", "partition_key", "session_id", "batch_id", "service_name"]
    got = loaded.valid.select(
        *columns,
        F.unix_micros("send_time").alias("send_time"),
        F.unix_micros("scheduled_enqueue_time").alias("scheduled"),
    )
    # the loader rounds nanoseconds to the nearest microsecond
    starts = [(s.start_time + 500) // 1000 for s in finished if s.start_time is not None]
    assert sorted(tuple(r) for r in got.collect()) == sorted(
        [
            ("order-1042", "orders", "cust-7", None, None, "myapp", starts[0], None),
            ("order-1043", "orders", "c-8", None, batch_id, "myapp", starts[1], None),
            ("order-1044", "orders", None, "s-1", batch_id, "myapp", starts[2], None),
            ("remind-1042", "orders", None, None, batch_id, "myapp", starts[3], _micros(SCHEDULED)),
        ]
    )
