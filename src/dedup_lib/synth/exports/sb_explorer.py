"""Canonical telemetry written as Service Bus Explorer saves messages: how the samples and the
tests make exports of what a broker kept. The reader is
:mod:`dedup_lib.telemetry.formats.sb_explorer`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dedup_lib.errors import InputError
from dedup_lib.synth.exports.single_file import (
    check_size,
    dotnet_time,
    sends_in_time_order,
    write_text,
)
from dedup_lib.telemetry.formats.sb_explorer import NEVER_TIME, UNSET_TIME
from dedup_lib.telemetry.schema import CANONICAL_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def write_sb_explorer(frame: DataFrame, path: str) -> None:
    """Write canonical telemetry of one entity as Service Bus Explorer saves messages: an
    indented JSON array, ordered by send time, sequence numbers from 1, the other columns
    as application properties, a small text body. The file name should be the entity's
    (``orders.json``): the format has no place for it."""
    caller = "sb-explorer write"
    if "entity" in frame.columns:
        entities = frame.select("entity").distinct().limit(2).collect()
        if len(entities) > 1:
            raise InputError(
                f"{caller}: {path} would mix entities, which the format cannot tell "
                "apart; write one file per entity, named after it (orders.json)"
            )
    check_size(frame, caller, path)
    write_text(path, _document(frame, caller, path))


_DOTNET_TYPES = {bool: "Boolean", int: "Int64", float: "Double", str: "String"}


def _message(row: dict[str, Any], sequence: int, extra: list[str]) -> dict[str, Any]:
    properties = [
        {"key": name, "type": _DOTNET_TYPES.get(type(row[name]), "String"), "value": str(row[name])}
        for name in extra
        if row[name] is not None
    ]
    if row.get("batch_id") is not None:
        properties.append({"key": "BatchId", "type": "String", "value": str(row["batch_id"])})
    scheduled = row.get("__scheduled")
    body = f"message {row.get('payload_hash') or row['message_id']}"
    return {
        "body": body,
        "contentType": None,
        "correlationId": None,
        "deliveryCount": 0,
        "enqueuedSequenceNumber": 0,
        "enqueuedTimeUtc": dotnet_time(row["__send"]),
        "expiresAtUtc": NEVER_TIME,
        "forcePersistence": False,
        "isBodyConsumed": False,
        "label": None,
        "lockedUntilUtc": None,
        "lockToken": None,
        "messageId": row["message_id"],
        "partitionKey": row.get("partition_key"),
        "properties": properties,
        "replyTo": None,
        "replyToSessionId": None,
        "scheduledEnqueueTimeUtc": dotnet_time(scheduled) if scheduled is not None else UNSET_TIME,
        "sequenceNumber": sequence,
        "sessionId": row.get("session_id"),
        "size": len(body.encode()) + 100,
        "state": 0,
        "timeToLive": "10675199.02:48:05.4775807",
        "to": None,
        "viaPartitionKey": None,
    }


def _document(frame: DataFrame, caller: str, path: str) -> Iterator[str]:
    """The JSON array, one message at a time."""
    extra = [c for c in frame.columns if c not in CANONICAL_COLUMNS]
    yield "["
    for sequence, row in enumerate(sends_in_time_order(frame, caller, path), start=1):
        text = json.dumps(_message(row, sequence, extra), indent=2)
        yield ("," if sequence > 1 else "") + "\n  " + text.replace("\n", "\n  ")
    yield "\n]\n"
