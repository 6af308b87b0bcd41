"""Canonical telemetry written as Application Insights exports its dependency rows: how the
samples and the tests make such files. The reader is
:mod:`dedup_lib.telemetry.formats.app_insights`."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from dedup_lib.errors import InputError
from dedup_lib.synth.exports.single_file import (
    EPOCH,
    check_size,
    dotnet_time,
    sends_in_time_order,
    write_text,
)
from dedup_lib.telemetry.formats.app_insights import LINKS
from dedup_lib.telemetry.schema import CANONICAL_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def write_app_insights(frame: DataFrame, path: str) -> None:
    """Write canonical telemetry as the portal's CSV (``.csv``: byte-order mark,
    ``TimeGenerated [UTC]`` in its millisecond time text) or the query API's JSON
    (``.json``: times with microseconds), with a call row per send call linking its
    messages and unrelated HTTP rows, so that reading exercises both. At most
    :data:`~dedup_lib.synth.exports.single_file.MAX_DOCUMENT_ROWS` sends."""
    _write(frame, path, "app-insights write")


#: The workspace table's columns the writer fills, with their query API types.
_COLUMNS = (
    ("TimeGenerated", "datetime"),
    ("Id", "string"),
    ("Target", "string"),
    ("DependencyType", "string"),
    ("Name", "string"),
    ("Data", "string"),
    ("Success", "bool"),
    ("ResultCode", "string"),
    ("DurationMs", "real"),
    ("Properties", "dynamic"),
    ("OperationId", "string"),
    ("ParentId", "string"),
    ("AppRoleName", "string"),
    ("Type", "string"),
)
_NAMESPACE = "contoso.servicebus.windows.net"
_UNRELATED_EVERY = 25


def _span_id(*parts: object, width: int = 16) -> str:
    """A stable hex id, as the exporters write span (16) and trace (32) ids."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=width // 2).hexdigest()


def portal_text(micros: int) -> str:
    """Epoch microseconds as the portal's CSV writes a UTC time: milliseconds, truncated."""
    moment = EPOCH + timedelta(microseconds=micros)
    hour = moment.hour % 12 or 12
    half = "AM" if moment.hour < 12 else "PM"
    return (
        f"{moment.month}/{moment.day}/{moment.year}, {hour}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond // 1000:03d} {half}"
    )


def _dependencies(frame: DataFrame, caller: str, path: str) -> list[dict[str, Any]]:
    """Canonical sends as dependency rows, in time order: a message row per send, a call row
    per send call (a ``batch_id`` of an entity, else the send alone) linking its messages, and
    an unrelated HTTP row every :data:`_UNRELATED_EVERY` sends."""
    extra = [c for c in frame.columns if c not in CANONICAL_COLUMNS]
    calls: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
    for index, send in enumerate(sends_in_time_order(frame, caller, path)):
        batch = send.get("batch_id")
        key = (send.get("entity"), batch) if batch is not None else (None, None, index)
        calls.setdefault(key, []).append((index, send))
    out: list[dict[str, Any]] = []
    for key, members in calls.items():
        operation = _span_id("operation", key, width=32)
        entity = members[0][1].get("entity")
        common = {
            "Target": f"{_NAMESPACE}/{entity}" if entity is not None else _NAMESPACE,
            "OperationId": operation,
            "ParentId": _span_id("app", key),
            "AppRoleName": members[0][1].get("sender") or "sender",
        }
        links = []
        for index, send in members:
            message = _message_row(common, index, send, extra)
            links.append({"operation_Id": operation, "id": message["Id"]})
            out.append(message)
            if index % _UNRELATED_EVERY == 0:
                out.append(_unrelated_row(index, send["__send"] - 1000))
        out.append(
            {
                **common,
                "__time": min(send["__send"] for _, send in members),
                "Id": _span_id("call", key),
                "DependencyType": "Azure Service Bus",
                "Name": "ServiceBusSender.Send",
                "Properties": {LINKS: json.dumps(links)},
            }
        )
    out.sort(key=lambda row: (row["__time"], row["Id"]))
    return out


def _message_row(
    common: dict[str, Any], index: int, send: dict[str, Any], extra: list[str]
) -> dict[str, Any]:
    """The dependency row of one message of a send call, its properties set as the SDK's."""
    scheduled = send.get("__scheduled")
    properties = {
        "MessageId": send.get("message_id"),
        "PartitionKey": send.get("partition_key"),
        "SessionId": send.get("session_id"),
        "ScheduledEnqueueTimeUtc": dotnet_time(scheduled) if scheduled is not None else None,
        **{name: str(send[name]) for name in extra if send[name] is not None},
    }
    return {
        **common,
        "__time": send["__send"],
        "Id": _span_id("message", index),
        "DependencyType": "Queue Message | Azure Service Bus",
        "Name": "Message",
        "Properties": {k: v for k, v in properties.items() if v is not None},
    }


def _unrelated_row(index: int, micros: int) -> dict[str, Any]:
    """An HTTP dependency of the same application, which the loader must skip."""
    return {
        "__time": micros,
        "Id": _span_id("http", index),
        "Target": "api.contoso.com",
        "DependencyType": "HTTP",
        "Name": "GET /api/orders",
        "Data": "https://api.contoso.com/api/orders",
        "ResultCode": "200",
        "OperationId": _span_id("http operation", index, width=32),
        "Properties": {},
    }


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "Success": True,
        "ResultCode": row.get("ResultCode", "0"),
        "DurationMs": 1.5,
        "AppRoleName": "sender",
        "Type": "AppDependencies",
        **row,
        "Properties": json.dumps(row["Properties"]),
    }


def _csv_lines(rows: list[dict[str, Any]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC)
    names = [name for name, _ in _COLUMNS]
    writer.writerow(["TimeGenerated [UTC]", *names[1:]])
    for row in rows:
        cells = _cells(row)
        cells["TimeGenerated"] = portal_text(row["__time"])
        cells["Success"] = str(cells["Success"])
        writer.writerow([cells.get(name, "") for name in names])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()


def _json_document(rows: list[dict[str, Any]]) -> Iterator[str]:
    columns = [{"name": name, "type": kind} for name, kind in _COLUMNS]
    yield '{"tables": [{"name": "PrimaryResult", "columns": ' + json.dumps(columns)
    yield ', "rows": ['
    for index, row in enumerate(rows):
        cells = _cells(row)
        cells["TimeGenerated"] = dotnet_time(row["__time"])
        values = [cells.get(name) for name, _ in _COLUMNS]
        yield ("," if index else "") + "\n" + json.dumps(values)
    yield "\n]}]}\n"


def _write(frame: DataFrame, path: str, caller: str) -> None:
    shape = path.lower().removesuffix(".gz")
    if not shape.endswith((".csv", ".json")):
        raise InputError(f"{caller}: {path} must end in .csv or .json (then .gz if wanted)")
    check_size(frame, caller, path)
    rows = _dependencies(frame, caller, path)
    if shape.endswith(".csv"):
        write_text(path, _csv_lines(rows), bom=True)
    else:
        write_text(path, _json_document(rows))
