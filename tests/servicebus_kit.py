"""Real ``azure-servicebus`` senders without a namespace: only the AMQP link is stood in for.

:class:`Link` (and :class:`AsyncLink`, for ``aio``) takes the place of a sender's link: the
SDK's own code builds, fills in and encodes the messages, and the link decodes the bytes it
would put on the wire, so a test checks recorded ids against the ids the broker would have got
(:func:`wire_ids`). :func:`stand_in_links` gives every sender a client makes one, for code that
creates its own senders (the instrumentation guide's blocks). :data:`CONNECTION` is a
connection string for a namespace that does not exist: nothing connects to it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageBatch
from azure.servicebus._pyamqp._decode import decode_payload
from azure.servicebus._pyamqp.message import Message
from azure.servicebus._transport._pyamqp_transport import PyamqpTransport

CONNECTION = (
    "Endpoint=sb://example.servicebus.windows.net/;SharedAccessKeyName=x;"
    "SharedAccessKey=eA==;EntityPath=orders"
)
LINK_MAX_SIZE = 256 * 1024  # what a Standard namespace's link reports


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _decoded_ids(payloads: list[Any]) -> list[str | None]:
    decoded = [decode_payload(memoryview(p)) for p in payloads]
    return [_text(m.properties.message_id) if m.properties else None for m in decoded]


def wire_ids(sent: ServiceBusMessage | ServiceBusMessageBatch) -> list[str | None]:
    """The MessageIds in the AMQP bytes the SDK hands its link for one send."""
    if isinstance(sent, ServiceBusMessageBatch):
        return _decoded_ids(sent._message[5])
    return _decoded_ids([PyamqpTransport.encode_message(sent)])


class Link:
    """Stands in for a sender's AMQP link: opens at once with a Standard tier's sizes, keeps the
    ids of each send (and schedule request) as encoded, and raises the failures queued in
    ``failures`` after the bytes went out, as a lost acknowledgement does."""

    def __init__(self, sender: Any) -> None:
        self.sender = sender
        self.sends: list[list[str | None]] = []
        self.failures: list[Exception] = []
        self.lock = threading.Lock()

    def open(self, timeout: float | None = None) -> None:
        self.sender._running = True
        self.sender._max_message_size_on_link = LINK_MAX_SIZE
        self.sender._max_batch_size_on_link = LINK_MAX_SIZE

    def send(self, message: Any, timeout: float | None = None, last_exception: Any = None) -> None:
        with self.lock:
            self.sends.append(wire_ids(message))
            if self.failures:
                raise self.failures.pop(0)

    def mgmt(self, mgmt_operation: bytes, message: Any, callback: Any, **kwargs: Any) -> Any:
        with self.lock:
            requested = message["messages"]
            self.sends.append(_decoded_ids([m["message"] for m in requested]))
            if self.failures:
                raise self.failures.pop(0)
        numbers = [1000 + i for i in range(len(requested))]
        response = Message(value={b"sequence-numbers": numbers}, application_properties={})
        return callback(200, response, None, amqp_transport=self.sender._amqp_transport)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(self.sender, "_open", self.open)
        monkeypatch.setattr(self.sender, "_send", self.send)
        monkeypatch.setattr(self.sender, "_mgmt_request_response", self.mgmt)


class AsyncLink(Link):
    """:class:`Link` for an ``aio`` sender."""

    async def open(self, timeout: float | None = None) -> None:  # type: ignore[override]
        super().open(timeout)

    async def send(  # type: ignore[override]
        self, message: Any, timeout: float | None = None, last_exception: Any = None
    ) -> None:
        super().send(message)

    async def mgmt(  # type: ignore[override]
        self, mgmt_operation: bytes, message: Any, callback: Any, **kwargs: Any
    ) -> Any:
        return super().mgmt(mgmt_operation, message, callback)


def stand_in_links(monkeypatch: pytest.MonkeyPatch) -> list[Link]:
    """Every sync sender a ``ServiceBusClient`` makes from now on (queue or topic) gets a
    :class:`Link`, listed in the order the senders were made."""
    links: list[Link] = []
    for name in ("get_queue_sender", "get_topic_sender"):
        make = getattr(ServiceBusClient, name)

        def linked(client: ServiceBusClient, *args: Any, _make: Any = make, **kwargs: Any) -> Any:
            link = Link(_make(client, *args, **kwargs))
            link.install(monkeypatch)
            links.append(link)
            return link.sender

        monkeypatch.setattr(ServiceBusClient, name, linked)
    return links
