"""The canonical telemetry schema: the columns the replay reads, the names the Azure SDKs give
them, and the file formats the readers and the writer know."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

#: Canonical columns, in output order. Only ``message_id`` and ``send_time`` are required.
#: ``batch_id`` names the send call that carried a message: sends sharing it (on one entity)
#: were one batch (docs/rules.md, section 3); without it every send is its own call.
CANONICAL_COLUMNS = (
    "message_id",
    "send_time",
    "entity",
    "partition_key",
    "session_id",
    "scheduled_enqueue_time",
    "event_id",
    "batch_id",
)
REQUIRED_COLUMNS = ("message_id", "send_time")
#: Canonical columns of text (a number is taken as its text) and of times.
TEXT_COLUMNS = ("message_id", "entity", "partition_key", "session_id", "batch_id")
TIME_COLUMNS = ("send_time", "scheduled_enqueue_time")

#: The name the loader's errors give themselves, and the page that says how to record sends.
LOADER = "load_telemetry"
GUIDE = "docs/instrumentation.md"


def mapping_hint(pairs: dict[str, str]) -> str:
    """How to pass ``pairs`` (source: canonical), as the loader's ``mapping`` and as the
    command line's ``--map``: an error says both, as both read it."""
    flags = " ".join(
        f"--map {shlex.quote(f'{source}={target}')}" for source, target in pairs.items()
    )
    return f"mapping={pairs!r} ({flags} on the command line)"


def format_hint(names: Sequence[str]) -> str:
    """How to name one of the formats ``names``, as the loader's ``format`` and as the command
    line's ``--format``: an error says both, as both read it."""

    def either(items: Sequence[str]) -> str:
        return f"{', '.join(items[:-1])} or {items[-1]}" if len(items) > 1 else items[0]

    quoted = either([repr(name) for name in names])
    return f"format={quoted} (--format {either(names)} on the command line)"


#: Source names accepted without a mapping, per canonical column, besides the canonical name
#: itself. Matched ignoring case and underscores: ``EnqueuedTimeUtc``, ``enqueued_time_utc``
#: and ``ENQUEUED_TIME_UTC`` are one name. Python SDK (``enqueued_time_utc``) and .NET SDK
#: (``EnqueuedTime``) property names, plus ``SendTime``/``SentTime`` for send logs.
BUILTIN_ALIASES: dict[str, tuple[str, ...]] = {
    "message_id": ("MessageId",),
    "send_time": ("EnqueuedTimeUtc", "EnqueuedTime", "SendTime", "SentTime"),
    "entity": ("EntityPath", "Entity"),
    "partition_key": ("PartitionKey",),
    "session_id": ("SessionId",),
    "scheduled_enqueue_time": ("ScheduledEnqueueTimeUtc", "ScheduledEnqueueTime"),
    "event_id": ("EventId",),
    "batch_id": ("BatchId",),
}

FORMATS = ("parquet", "csv", "json")
SUPPORTED_FORMATS = (
    "Parquet (.parquet), CSV with a header row (.csv, .csv.gz), "
    "JSON Lines (.jsonl, .ndjson, .json, and their .gz)"
)
#: The formats with a structure of their own, in the order content is recognised: their readers
#: are :data:`dedup_lib.telemetry.formats.RECORD_FORMATS`, named here for whoever needs only the
#: names (the command line's choices), without Spark.
RECORD_FORMAT_NAMES = ("otlp", "app-insights", "sb-explorer")
#: Column names per naming style for :func:`write_telemetry`: ``azure`` as in the Service Bus
#: REST API's ``BrokerProperties`` (and the older .NET SDK), ``python`` as in azure-servicebus.
#: Both are among the names :func:`load_telemetry` maps back without being told.
NAMING_STYLES: dict[str, dict[str, str]] = {
    "canonical": {},
    "azure": {
        "message_id": "MessageId",
        "send_time": "EnqueuedTimeUtc",
        "entity": "EntityPath",
        "partition_key": "PartitionKey",
        "session_id": "SessionId",
        "scheduled_enqueue_time": "ScheduledEnqueueTimeUtc",
        "event_id": "EventId",
        "batch_id": "BatchId",
    },
    "python": {
        "send_time": "enqueued_time_utc",
        "entity": "entity_path",
        "scheduled_enqueue_time": "scheduled_enqueue_time_utc",
    },
}

#: Format names a user may give, to the reader Spark uses for each.
FORMAT_NAMES = {
    "parquet": "parquet",
    "csv": "csv",
    "json": "json",
    "jsonl": "json",
    "ndjson": "json",
}

#: ISO 8601 with microseconds and offset (``Z`` in UTC), so text files lose no precision.
TEXT_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
