"""Record an ``azure-servicebus`` sender's sends as JSON Lines in the canonical schema.

``record_sends(sender, "sends.jsonl")`` wraps a ``ServiceBusSender`` (sync or ``aio``): each
``send_messages`` or ``schedule_messages`` call goes on to the SDK, then writes one line per
message with the MessageId the SDK sent, so ``load_telemetry`` reads the file without a mapping
and the replay sees every send, failed ones included (a failed call may have reached the
broker: that is how a lost acknowledgement shows up). See docs/instrumentation.md, section 3.

This module runs inside applications, so it imports the standard library only (the SDK's
classes lazily, when a call needs them) and nothing else from ``dedup_lib``: it can be copied
into an application as this one file (Python 3.11+, ``azure-servicebus`` 7.11+), without
installing ``dedup_lib`` and its Spark dependencies.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    from types import TracebackType

    from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch, ServiceBusSender
    from azure.servicebus.aio import ServiceBusSender as AsyncServiceBusSender
    from azure.servicebus.amqp import AmqpAnnotatedMessage

    Message = ServiceBusMessage | AmqpAnnotatedMessage | Mapping[str, Any]
    Messages = Message | Iterable[Message]

__all__ = ["AsyncRecordingSender", "RecordingSender", "record_sends"]

#: Longest exception message kept in ``error``, in characters.
ERROR_LENGTH = 500

Clock = Callable[[], datetime]

_LOGGER = logging.getLogger(__name__)
_WRITE_LOCK = threading.Lock()
_PARTITION_KEY = b"x-opt-partition-key"
_SCHEDULED = b"x-opt-scheduled-enqueue-time"


def _utc_now() -> datetime:
    """The default clock: now, in UTC."""
    return datetime.now(UTC)


def _iso(moment: datetime | int | float | None) -> str | None:
    """ISO 8601 in UTC with microseconds and ``Z``; a naive time is UTC (as the SDK encodes it),
    a number is epoch milliseconds (as AMQP annotations carry times)."""
    if moment is None:
        return None
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment / 1000, UTC)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _annotation(annotations: Mapping[Any, Any] | None, key: bytes) -> Any:
    if not annotations:
        return None
    value = annotations.get(key)
    return annotations.get(key.decode()) if value is None else value


def _fields(message: object) -> dict[str, Any]:
    """The columns one message carries: MessageId, partition key, session id, scheduled time."""
    from azure.servicebus import ServiceBusMessage
    from azure.servicebus.amqp import AmqpAnnotatedMessage

    mid: object
    key: object
    session: object
    scheduled: Any
    if isinstance(message, ServiceBusMessage):
        mid, key = message.message_id, message.partition_key
        session, scheduled = message.session_id, message.scheduled_enqueue_time_utc
    elif isinstance(message, AmqpAnnotatedMessage):
        props, annotations = message.properties, message.annotations
        mid = props.message_id if props else None
        session = props.group_id if props else None
        key = _annotation(annotations, _PARTITION_KEY)
        scheduled = _annotation(annotations, _SCHEDULED)
    elif isinstance(message, Mapping):
        mid, key = message.get("message_id"), message.get("partition_key")
        session, scheduled = message.get("session_id"), message.get("scheduled_enqueue_time_utc")
    else:
        mid = key = session = scheduled = None
    return {
        "message_id": _text(mid),
        "partition_key": _text(key),
        "session_id": _text(session),
        "scheduled_enqueue_time": _iso(scheduled),
    }


def _prepared(messages: Messages | ServiceBusMessageBatch) -> tuple[Any, list[Any]]:
    """What to hand the SDK, and the message objects to read once the call is over.

    A mapping becomes the ``ServiceBusMessage`` the SDK would build from it, and an iterable a
    list: otherwise the SDK would fill in a GUID on an object the recorder never sees. A batch
    is read from its private ``_messages`` (in 7.11 to 7.15; no public list exists), which
    hold the very objects the SDK encoded."""
    from azure.servicebus import ServiceBusMessage, ServiceBusMessageBatch
    from azure.servicebus.amqp import AmqpAnnotatedMessage

    def built(message: Any) -> Any:
        if isinstance(message, Mapping):
            try:
                return ServiceBusMessage(**message)
            except Exception:
                return message  # the SDK raises the same inside the call, where it is recorded
        return message

    if isinstance(messages, ServiceBusMessageBatch):
        return messages, messages._messages
    if isinstance(messages, ServiceBusMessage | AmqpAnnotatedMessage | Mapping):
        single = built(messages)
        return single, [single]
    if isinstance(messages, Iterable) and not isinstance(messages, str | bytes):
        listed = [built(m) for m in messages]
        return listed, listed
    return messages, [messages]


class _Recorder:
    """Writes the lines of one send call; never lets recording change the send's outcome."""

    def __init__(self, entity: str, path_or_file: str | os.PathLike[str] | IO[str], clock: Clock):
        self.entity = entity
        self.clock = clock
        if isinstance(path_or_file, str | os.PathLike):
            # A path like sends/orders-host1.jsonl, on a host where sends/ is not made yet.
            os.makedirs(os.path.dirname(os.fspath(path_or_file)) or ".", exist_ok=True)
            self.file: IO[str] = open(  # noqa: SIM115 - kept open for the sender's life
                path_or_file, "a", encoding="utf-8", newline="\n", buffering=1
            )
            self.owned = True
        else:
            self.file, self.owned = path_or_file, False

    def record(
        self,
        messages: list[Any],
        call_start: datetime,
        *,
        error: BaseException | None = None,
        scheduled: datetime | None = None,
        sequence_numbers: object = None,
    ) -> None:
        try:
            send_time = _iso(self.clock())
            numbers = (
                list(sequence_numbers)
                if isinstance(sequence_numbers, list | tuple)
                and len(sequence_numbers) == len(messages)
                else [None] * len(messages)
            )
            call: dict[str, Any] = {
                "batch_id": str(uuid.uuid4()),
                "call_start": _iso(call_start),
                "outcome": "sent" if error is None else type(error).__name__,
                "error": None if error is None else _cut(str(error)),
            }
            lines = []
            for message, number in zip(messages, numbers, strict=True):
                fields = _fields(message)
                if scheduled is not None:
                    fields["scheduled_enqueue_time"] = _iso(scheduled)
                    call["sequence_number"] = None if number is None else int(number)
                row = {
                    "message_id": fields.pop("message_id"),
                    "send_time": send_time,
                    "entity": self.entity,
                    **fields,
                    **call,
                }
                lines.append(json.dumps(row, ensure_ascii=False) + "\n")
            with _WRITE_LOCK:
                self.file.write("".join(lines))
                self.file.flush()
        except Exception:
            _LOGGER.exception("record_sends: could not record %d sends", len(messages))

    def close(self) -> None:
        if self.owned:
            self.file.close()


def _cut(text: str) -> str:
    return text if len(text) <= ERROR_LENGTH else text[: ERROR_LENGTH - 3] + "..."


_Sender = TypeVar("_Sender", "ServiceBusSender", "AsyncServiceBusSender")


class _Wrapper(Generic[_Sender]):
    """What both recording senders hold: the wrapped sender and the recorder of its calls."""

    def __init__(
        self,
        sender: _Sender,
        path_or_file: str | os.PathLike[str] | IO[str],
        *,
        clock: Clock = _utc_now,
    ) -> None:
        self.sender: _Sender = sender
        self._recorder = _Recorder(sender.entity_name, path_or_file, clock)

    @property
    def entity_name(self) -> str:
        """The queue or topic the wrapped sender sends to."""
        return self.sender.entity_name


class RecordingSender(_Wrapper["ServiceBusSender"]):
    """A ``ServiceBusSender`` that writes a JSON line per message it sends or schedules.

    Same calls as the sender it wraps (``send_messages``, ``schedule_messages``,
    ``create_message_batch``, ``cancel_scheduled_messages``, ``close``, ``with``); the
    wrapped one is ``sender``. Each call's lines share a fresh ``batch_id``; an exception is
    recorded, then re-raised unchanged. Thread-safe; the file is flushed after every call.
    """

    def send_messages(self, message: Messages | ServiceBusMessageBatch, **kwargs: Any) -> None:
        """Send as ``ServiceBusSender.send_messages`` does, then record each message."""
        sent, messages = _prepared(message)
        start = self._recorder.clock()
        try:
            self.sender.send_messages(sent, **kwargs)
        except BaseException as exc:
            self._recorder.record(messages, start, error=exc)
            raise
        self._recorder.record(messages, start)

    def schedule_messages(
        self, messages: Messages, schedule_time_utc: datetime, **kwargs: Any
    ) -> list[int]:
        """Schedule as ``ServiceBusSender.schedule_messages`` does, then record each message
        with its scheduled time and the sequence number the broker returned for it."""
        sent, listed = _prepared(messages)
        start = self._recorder.clock()
        try:
            numbers = self.sender.schedule_messages(sent, schedule_time_utc, **kwargs)
        except BaseException as exc:
            self._recorder.record(listed, start, error=exc, scheduled=schedule_time_utc)
            raise
        self._recorder.record(listed, start, scheduled=schedule_time_utc, sequence_numbers=numbers)
        return numbers

    def create_message_batch(self, max_size_in_bytes: int | None = None) -> ServiceBusMessageBatch:
        """The wrapped sender's batch: send it with this wrapper's ``send_messages``."""
        return self.sender.create_message_batch(max_size_in_bytes)

    def cancel_scheduled_messages(self, sequence_numbers: int | list[int], **kwargs: Any) -> None:
        """Cancel as the wrapped sender does (not recorded: it sends no message)."""
        self.sender.cancel_scheduled_messages(sequence_numbers, **kwargs)

    def close(self) -> None:
        """Close the wrapped sender, then the file if this wrapper opened it."""
        try:
            self.sender.close()
        finally:
            self._recorder.close()

    def __enter__(self) -> RecordingSender:
        self.sender.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncRecordingSender(_Wrapper["AsyncServiceBusSender"]):
    """:class:`RecordingSender` for ``azure.servicebus.aio.ServiceBusSender``: the same calls,
    awaited. The lines are written from the event loop's thread (a short, flushed write)."""

    async def send_messages(
        self, message: Messages | ServiceBusMessageBatch, **kwargs: Any
    ) -> None:
        """Send as ``ServiceBusSender.send_messages`` does, then record each message."""
        sent, messages = _prepared(message)
        start = self._recorder.clock()
        try:
            await self.sender.send_messages(sent, **kwargs)
        except BaseException as exc:
            self._recorder.record(messages, start, error=exc)
            raise
        self._recorder.record(messages, start)

    async def schedule_messages(
        self, messages: Messages, schedule_time_utc: datetime, **kwargs: Any
    ) -> list[int]:
        """Schedule as ``ServiceBusSender.schedule_messages`` does, then record each message."""
        sent, listed = _prepared(messages)
        start = self._recorder.clock()
        try:
            numbers = await self.sender.schedule_messages(sent, schedule_time_utc, **kwargs)
        except BaseException as exc:
            self._recorder.record(listed, start, error=exc, scheduled=schedule_time_utc)
            raise
        self._recorder.record(listed, start, scheduled=schedule_time_utc, sequence_numbers=numbers)
        return numbers

    async def create_message_batch(
        self, max_size_in_bytes: int | None = None
    ) -> ServiceBusMessageBatch:
        """The wrapped sender's batch: send it with this wrapper's ``send_messages``."""
        return await self.sender.create_message_batch(max_size_in_bytes)

    async def cancel_scheduled_messages(
        self, sequence_numbers: int | list[int], **kwargs: Any
    ) -> None:
        """Cancel as the wrapped sender does (not recorded: it sends no message)."""
        await self.sender.cancel_scheduled_messages(sequence_numbers, **kwargs)

    async def close(self) -> None:
        """Close the wrapped sender, then the file if this wrapper opened it."""
        try:
            await self.sender.close()
        finally:
            self._recorder.close()

    async def __aenter__(self) -> AsyncRecordingSender:
        await self.sender.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


@overload
def record_sends(
    sender: ServiceBusSender,
    path_or_file: str | os.PathLike[str] | IO[str],
    *,
    clock: Clock = ...,
) -> RecordingSender: ...


@overload
def record_sends(
    sender: AsyncServiceBusSender,
    path_or_file: str | os.PathLike[str] | IO[str],
    *,
    clock: Clock = ...,
) -> AsyncRecordingSender: ...


def record_sends(
    sender: ServiceBusSender | AsyncServiceBusSender,
    path_or_file: str | os.PathLike[str] | IO[str],
    *,
    clock: Clock = _utc_now,
) -> RecordingSender | AsyncRecordingSender:
    """Wrap a Service Bus sender so each message it sends or schedules is written as a line
    of JSON: telemetry with the MessageId, made where it is known.

    Parameters
    ----------
    sender : ServiceBusSender or azure.servicebus.aio.ServiceBusSender
        The application's sender; an ``aio`` one gives an :class:`AsyncRecordingSender`.
    path_or_file : str, PathLike or text file
        A path, opened for appending (its folder made if missing), or an open text file.
    clock : callable, optional
        The times written (``call_start`` before the call, ``send_time`` after it); default
        the UTC wall clock.

    Returns
    -------
    RecordingSender or AsyncRecordingSender
        The sender's calls, each recorded (with its outcome: ``sent``, or the exception's
        name) and then passed on.

    Examples
    --------
    A stand-in for ``ServiceBusClient(...).get_queue_sender("orders")``:

    >>> import json
    >>> from azure.servicebus import ServiceBusMessage
    >>> from dedup_lib import record_sends
    >>> class Sender:
    ...     entity_name = "orders"
    ...     def send_messages(self, message, **kwargs): pass
    ...     def close(self): pass
    ...     def __enter__(self): return self
    ...     def __exit__(self, *exc): self.close()
    >>> with record_sends(Sender(), "sends.jsonl") as sender:
    ...     sender.send_messages(ServiceBusMessage(b"{}", message_id="order-1"))
    >>> line = json.loads(open("sends.jsonl").read())
    >>> line["entity"], line["message_id"], line["outcome"]
    ('orders', 'order-1', 'sent')
    """
    if inspect.iscoroutinefunction(sender.send_messages):
        return AsyncRecordingSender(sender, path_or_file, clock=clock)  # type: ignore[arg-type]
    return RecordingSender(sender, path_or_file, clock=clock)  # type: ignore[arg-type]
