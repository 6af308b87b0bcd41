"""The canonical telemetry schema: the columns the replay reads, the names the Azure SDKs give
them, and the file formats the readers and the writer know."""

from __future__ import annotations

#: Canonical columns, in output order. Only ``message_id`` and ``send_time`` are required.
#: ``batch_id`` names the send call that carried a message: sends sharing it (on one entity)
#: were one batch (SPEC section 3); without it every send is its own call.
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
