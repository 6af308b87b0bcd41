"""record_sends on real azure-servicebus senders, messages and batches.

Only the AMQP link is stood in for (:class:`servicebus_kit.Link`): the SDK's own code builds,
fills in and encodes the messages, and the link decodes the bytes it would put on the wire, so
the ids recorded are checked against the ids the broker would have got.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageProperties
from azure.servicebus.exceptions import OperationTimeoutError, ServiceBusConnectionError
from pyspark.sql import functions as F

import dedup_lib
from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, recorder
from dedup_lib.recorder import AsyncRecordingSender, RecordingSender, record_sends
from servicebus_kit import CONNECTION, LINK_MAX_SIZE, AsyncLink, Link


@pytest.fixture
def link(monkeypatch: pytest.MonkeyPatch) -> Iterator[Link]:
    # retry_total=0: a failure reaches the caller at once instead of after the SDK's backoff
    with ServiceBusClient.from_connection_string(CONNECTION, retry_total=0) as client:
        sender = client.get_queue_sender("orders")
        stand_in = Link(sender)
        stand_in.install(monkeypatch)
        yield stand_in


class Ticks:
    """A clock one millisecond further on each reading."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, 23, 41, 7, 512345, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def lines(out: io.StringIO | Path) -> list[dict[str, Any]]:
    text = out.read_text() if isinstance(out, Path) else out.getvalue()
    return [json.loads(line) for line in text.splitlines()]


def test_a_list_is_one_call_with_the_ids_the_sdk_sends(link: Link) -> None:
    out = io.StringIO()
    recording = record_sends(link.sender, out, clock=Ticks())
    assert isinstance(recording, RecordingSender)
    messages = [
        ServiceBusMessage("a"),
        ServiceBusMessage("b", message_id="order-2", partition_key="cust-7"),
        ServiceBusMessage("c", session_id="s-1"),
    ]
    recording.send_messages(messages)

    rows = lines(out)
    assert [r["message_id"] for r in rows] == link.sends[0] == [m.message_id for m in messages]
    assert rows[0]["message_id"] is not None  # the GUID ServiceBusMessage filled in
    assert len({r["batch_id"] for r in rows}) == 1
    assert [r["partition_key"] for r in rows] == [None, "cust-7", None]
    assert [r["session_id"] for r in rows] == [None, None, "s-1"]
    assert {r["entity"] for r in rows} == {"orders"}
    assert {r["outcome"] for r in rows} == {"sent"}
    assert {r["error"] for r in rows} == {None}
    assert rows[0]["call_start"] == "2026-11-23T23:41:07.513345Z"
    assert rows[0]["send_time"] == "2026-11-23T23:41:07.514345Z"  # read after the call
    assert list(rows[0]) == [
        "message_id",
        "send_time",
        "entity",
        "partition_key",
        "session_id",
        "scheduled_enqueue_time",
        "batch_id",
        "call_start",
        "outcome",
        "error",
    ]


def test_batches_mappings_and_amqp_messages(link: Link) -> None:
    out = io.StringIO()
    recording = record_sends(link.sender, out)
    batch = recording.create_message_batch()
    assert batch.max_size_in_bytes == LINK_MAX_SIZE
    batch.add_message(ServiceBusMessage("a", message_id="order-1"))
    batch.add_message({"body": "b"})  # the SDK builds a ServiceBusMessage with a fresh GUID
    batch.add_message(
        AmqpAnnotatedMessage(
            data_body=b"c",
            properties=AmqpMessageProperties(message_id="order-3", group_id="s-3"),
            annotations={b"x-opt-partition-key": "s-3"},
        )
    )
    recording.send_messages(batch)
    recording.send_messages({"body": "d"})
    recording.send_messages(AmqpAnnotatedMessage(data_body=b"e"))

    rows = lines(out)
    assert [r["message_id"] for r in rows] == [i for ids in link.sends for i in ids]
    assert rows[0]["message_id"] == "order-1"
    assert rows[1]["message_id"] is not None
    assert rows[3]["message_id"] is not None  # the mapping's GUID, read from what was sent
    assert rows[4]["message_id"] is None  # an AmqpAnnotatedMessage without one is sent without
    assert (rows[2]["session_id"], rows[2]["partition_key"]) == ("s-3", "s-3")
    assert [r["batch_id"] for r in rows[:3]] == [rows[0]["batch_id"]] * 3
    assert len({r["batch_id"] for r in rows}) == 3


def test_a_lost_acknowledgement_then_the_retry(link: Link) -> None:
    out = io.StringIO()
    recording = record_sends(link.sender, out)
    messages = [ServiceBusMessage("a", message_id="order-1"), ServiceBusMessage("b")]
    lost = OperationTimeoutError(message="Send timed out waiting for the acknowledgement")
    link.failures.append(lost)

    with pytest.raises(OperationTimeoutError) as raised:
        recording.send_messages(messages)
    # the SDK's own exception, passed on as raised: 7.11 raises the link's, 7.15 one from it
    assert lost in (raised.value, raised.value.__cause__)
    recording.send_messages(messages)

    first, retry = lines(out)[:2], lines(out)[2:]
    assert link.sends[0] == link.sends[1] == [r["message_id"] for r in first]
    assert [r["message_id"] for r in retry] == [r["message_id"] for r in first]
    assert {r["outcome"] for r in first} == {"OperationTimeoutError"}
    assert {r["error"] for r in first} == {"Send timed out waiting for the acknowledgement"}
    assert {r["outcome"] for r in retry} == {"sent"}
    assert len({r["batch_id"] for r in first} | {r["batch_id"] for r in retry}) == 2


def test_a_long_error_is_cut(link: Link) -> None:
    out = io.StringIO()
    recording = record_sends(link.sender, out)
    link.failures.append(ServiceBusConnectionError(message="x" * 2000))
    with pytest.raises(ServiceBusConnectionError):
        recording.send_messages(ServiceBusMessage("a"))
    (row,) = lines(out)
    assert row["outcome"] == "ServiceBusConnectionError"
    assert len(row["error"]) == recorder.ERROR_LENGTH
    assert row["error"].endswith("...")


def test_schedule_messages_times_and_sequence_numbers(link: Link) -> None:
    out = io.StringIO()
    recording = record_sends(link.sender, out)
    plus_two = timezone(timedelta(hours=2))
    numbers = recording.schedule_messages(
        [ServiceBusMessage("a", message_id="order-1"), {"body": "b"}],
        datetime(2026, 11, 24, 14, 0, tzinfo=plus_two),
    )
    recording.schedule_messages(AmqpAnnotatedMessage(data_body=b"c"), datetime(2026, 11, 24, 13))
    recording.send_messages(
        ServiceBusMessage("d", scheduled_enqueue_time_utc=datetime(2026, 11, 25, tzinfo=UTC))
    )

    rows = lines(out)
    assert numbers == [1000, 1001]
    assert [r["message_id"] for r in rows] == [i for ids in link.sends for i in ids]
    assert None not in [r["message_id"] for r in rows]  # the SDK gives scheduled ones an id
    assert [r["scheduled_enqueue_time"] for r in rows] == [
        "2026-11-24T12:00:00.000000Z",
        "2026-11-24T12:00:00.000000Z",
        "2026-11-24T13:00:00.000000Z",  # naive: UTC, as the SDK encodes it
        "2026-11-25T00:00:00.000000Z",
    ]
    assert [r.get("sequence_number") for r in rows] == [1000, 1001, 1000, None]
    assert rows[0]["batch_id"] == rows[1]["batch_id"] != rows[2]["batch_id"]


class YieldingFile(io.StringIO):
    """A text file that lets other threads run in the middle of every write."""

    def write(self, text: str) -> int:
        time.sleep(0.0002)
        return super().write(text)


def test_two_threads_write_whole_calls(link: Link) -> None:
    out = YieldingFile()
    recording = record_sends(link.sender, out)

    def sends(name: str) -> None:
        for i in range(40):
            call = [ServiceBusMessage(name, message_id=f"{name}-{i}-{j}") for j in range(3)]
            recording.send_messages(call)

    threads = [threading.Thread(target=sends, args=(name,)) for name in ("left", "right")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    rows = lines(out)
    assert sorted(r["message_id"] for r in rows) == sorted(i for ids in link.sends for i in ids)
    assert len(rows) == 240
    by_call = Counter(r["batch_id"] for r in rows)
    assert set(by_call.values()) == {3}
    assert len(by_call) == 80
    calls = [rows[i : i + 3] for i in range(0, len(rows), 3)]
    assert all(len({r["batch_id"] for r in call}) == 1 for call in calls)  # not interleaved


def test_a_path_is_appended_to_and_closed_with_the_sender(link: Link, tmp_path: Path) -> None:
    path = tmp_path / "sends.jsonl"
    path.write_text('{"message_id": "earlier"}\n')
    with record_sends(link.sender, path) as recording:
        recording.send_messages(ServiceBusMessage("a", message_id="order-1"))
        assert recording.entity_name == "orders"
        assert [r["message_id"] for r in lines(path)] == ["earlier", "order-1"]  # flushed
    assert recording._recorder.file.closed
    assert link.sender._shutdown.is_set()


def test_a_path_in_a_folder_not_made_yet_is_made(link: Link, tmp_path: Path) -> None:
    """As the instrumentation guide writes it: sends/orders-host1.jsonl on a fresh host."""
    path = tmp_path / "sends" / "orders-host1.jsonl"
    with record_sends(link.sender, path) as recording:
        recording.send_messages(ServiceBusMessage("a", message_id="order-1"))
    assert [r["message_id"] for r in lines(path)] == ["order-1"]


def test_a_failed_write_never_changes_the_send(
    link: Link, caplog: pytest.LogCaptureFixture
) -> None:
    out = io.StringIO()
    recording = record_sends(link.sender, out)
    out.close()
    recording.send_messages(ServiceBusMessage("a"))  # sent: no exception for the application
    assert len(link.sends) == 1
    assert "could not record 1 sends" in caplog.text


def test_the_async_sender(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()

    async def main() -> AsyncLink:
        client = AsyncServiceBusClient.from_connection_string(CONNECTION, retry_total=0)
        async with client:
            stand_in = AsyncLink(client.get_queue_sender("orders"))
            stand_in.install(monkeypatch)
            async with record_sends(stand_in.sender, out) as recording:
                assert isinstance(recording, AsyncRecordingSender)
                batch = await recording.create_message_batch()
                batch.add_message(ServiceBusMessage("a"))
                batch.add_message(ServiceBusMessage("b", message_id="order-2"))
                stand_in.failures.append(OperationTimeoutError(message="no acknowledgement"))
                with pytest.raises(OperationTimeoutError):
                    await recording.send_messages(batch)
                await recording.send_messages(batch)
                numbers = await recording.schedule_messages(
                    ServiceBusMessage("c"), datetime(2026, 11, 24, tzinfo=UTC)
                )
                assert numbers == [1000]
        return stand_in

    # In a thread of its own: an earlier test's driver (playwright) may hold this thread's loop.
    with ThreadPoolExecutor(max_workers=1) as pool:
        stand_in = pool.submit(asyncio.run, main()).result()
    rows = lines(out)
    assert [r["message_id"] for r in rows] == [i for ids in stand_in.sends for i in ids]
    assert [r["outcome"] for r in rows] == ["OperationTimeoutError"] * 2 + ["sent"] * 3
    assert rows[0]["message_id"] == rows[2]["message_id"]
    assert len({r["batch_id"] for r in rows}) == 3
    assert rows[4]["scheduled_enqueue_time"] == "2026-11-24T00:00:00.000000Z"


def test_the_file_stands_alone() -> None:
    """The module can be copied into an application: it imports the standard library only."""
    source = Path(recorder.__file__)
    script = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('record', {str(source)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'pandas', 'numpy', 'azure', 'dedup_lib')]\n"
        "assert callable(module.record_sends) and not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def test_public_names() -> None:
    assert "record_sends" in dedup_lib.__all__  # the wrappers it returns are recorder's
    assert dedup_lib.record_sends is record_sends


def closed_sender() -> Any:
    sender = ServiceBusClient.from_connection_string(CONNECTION).get_queue_sender("orders")
    sender.close()
    return sender


def test_a_call_refused_before_sending(link: Link) -> None:
    out = io.StringIO()
    with pytest.raises(ValueError, match="shutdown"):
        record_sends(closed_sender(), out).send_messages(ServiceBusMessage("a", message_id="x"))
    (row,) = lines(out)
    assert (row["message_id"], row["outcome"]) == ("x", "ValueError")
    assert link.sends == []


@pytest.mark.connect
def test_the_recording_replays_without_a_mapping(spark: Any, link: Link, tmp_path: Path) -> None:
    path = tmp_path / "sends.jsonl"
    with path.open("a") as out:
        refused = record_sends(closed_sender(), out)
        with pytest.raises(ValueError, match="shutdown"):
            refused.send_messages(ServiceBusMessage("a", message_id="order-0"))
        recording = record_sends(link.sender, out)
        recording.send_messages(ServiceBusMessage("a", message_id="order-0"))
        messages = [ServiceBusMessage("b", message_id="order-1"), ServiceBusMessage("c")]
        link.failures.append(OperationTimeoutError(message="no acknowledgement"))
        with pytest.raises(OperationTimeoutError):
            recording.send_messages(messages)
        recording.send_messages(messages)
        recording.schedule_messages(ServiceBusMessage("d"), datetime(2026, 11, 24, tzinfo=UTC))

    loaded = load_telemetry(spark, str(path))
    assert loaded.counts() == {"read": 7, "valid": 7, "quarantined": 0, "skipped": 0}
    assert loaded.mapping == {}
    # as docs/instrumentation.md says: drop the calls the SDK refused before sending anything
    never_left = ["ValueError", "TypeError", "MessageSizeExceededError"]
    sends = loaded.valid.where(~F.col("outcome").isin(never_left))
    result = detect_duplicates(sends, DedupPolicy("PT10M"))
    verdicts = [
        (r["message_id"], r["outcome"], r["verdict"])
        for r in result.orderBy("send_time", "event_id").collect()
    ]
    second, third = messages[0].message_id, messages[1].message_id
    assert verdicts[:5] == [
        ("order-0", "sent", "accepted"),
        (second, "OperationTimeoutError", "accepted"),
        (third, "OperationTimeoutError", "accepted"),
        (second, "sent", "duplicate"),
        (third, "sent", "duplicate"),
    ]
    assert verdicts[5][2] == "accepted"
    unfiltered = detect_duplicates(loaded.valid, DedupPolicy("PT10M"))
    order_0 = unfiltered.where(F.col("message_id") == "order-0").orderBy("send_time").collect()
    assert [r["verdict"] for r in order_0] == ["accepted", "duplicate"]  # why the filter
