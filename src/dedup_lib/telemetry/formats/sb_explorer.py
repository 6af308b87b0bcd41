"""Service Bus Explorer message exports: what the broker kept, one record per message.

What the files are (paolosalvatori/ServiceBusExplorer, the version docs/telemetry-sources.md
names):
"Save Selected Message(s)" in a queue's or subscription's Messages or Deadletter tab writes
``MessageSerializationHelper.Serialize`` of the peeked ``BrokeredMessage`` objects: one JSON
object, or an indented JSON array of them, whose keys are the message's public properties in
camelCase, sorted (``body``, ``contentType``, ``correlationId``, ``deliveryCount``,
``enqueuedSequenceNumber``, ``enqueuedTimeUtc``, ``expiresAtUtc``, ..., ``messageId``,
``partitionKey``, ``properties``, ``scheduledEnqueueTimeUtc``, ``sequenceNumber``,
``sessionId``, ``size``, ``state``, ``timeToLive``, ``to``, ``viaPartitionKey``). Times are
Json.NET's default: ISO 8601 with up to 7 fractional digits, trailing zeros dropped, ``Z`` for
UTC times (``2014-12-03T16:39:48.4958476Z``); the unset ``scheduledEnqueueTimeUtc`` is
``0001-01-01T00:00:00`` and a "never" time ``9999-12-31T23:59:59.9999999`` (no ``Z``: .NET
``DateTime.MinValue``/``MaxValue``). ``properties`` (the application properties) is, since
2022 (#624), an array of ``{"key", "type", "value"}`` with the value as text; older versions
and the tool's documentation wrote a plain JSON object. Both are read.

The file does not name the entity, and the tool's default file name
(``BrokeredMessage_<Namespace>_<date>.json``) does not either. The entity is the value of a
key the user maps to ``entity`` (an application property, say), else the ``entity`` the user
passes, else the file's name without its ``.json``/``.txt`` and ``.gz`` extensions
(``orders.json`` and ``orders.json.gz`` are ``orders``; ``orders.eu.json`` is ``orders.eu``,
since entity names may hold dots), so a folder of exports named after their entities loads
together; a file still under the tool's default name gets no entity (null).

``send_time`` is ``enqueuedTimeUtc``, the time the broker stamped on acceptance: the time
duplicate detection goes by. Every message is a send (:data:`NOT_SEND` is always null), but
only accepted ones are there: a duplicate the broker dropped never is, so an export is the
broker's own answer to compare a replay with. ``sequenceNumber`` is kept as
``sequence_number``.

``keys`` name top-level keys of the message object (matched ignoring case), or an application
property as ``properties.<name>`` (``{"message_id": "properties.OrderId"}``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT, NOT_SEND, column
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.schema import CANONICAL_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_PROPERTIES = "properties"
_PROPERTY_PREFIX = "properties."
#: Json.NET's text of .NET ``DateTime.MinValue`` and ``MaxValue``: not set, and never.
UNSET_TIME = "0001-01-01T00:00:00"
NEVER_TIME = "9999-12-31T23:59:59.9999999"
_SENTINEL_TIME = r"^\s*(0001-01-01|9999-12-31)"
_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
_ENTRIES = T.ArrayType(
    T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.StringType())])
)
_HEAD_KEYS = (re.compile(r'"messageId"\s*:'), re.compile(r'"enqueuedTimeUtc"\s*:'))


def _find(fields: list[T.StructField], name: str) -> T.StructField | None:
    exact = next((f for f in fields if f.name == name), None)
    return exact or next((f for f in fields if f.name.lower() == name.lower()), None)


def _property(dtype: T.DataType, value: Column, name: str) -> Column:
    """Application property ``name`` of a ``properties`` value as Spark inferred it: an object
    (old exports), an array of ``{key, type, value}`` (since 2022), or text when files
    disagree (both shapes are tried)."""
    if isinstance(dtype, T.StructType):
        found = _find(dtype.fields, name)
        return value.getField(found.name).cast("string") if found else F.lit(None)
    if isinstance(dtype, T.ArrayType) and isinstance(dtype.elementType, T.StructType):
        names = {f.name for f in dtype.elementType.fields}
        if not {"key", "value"} <= names:
            return F.lit(None)
        matches = F.filter(value, lambda entry: entry.getField("key") == F.lit(name))
        return F.get(matches, 0).getField("value").cast("string")
    if isinstance(dtype, T.StringType):
        as_object = F.from_json(value, _TEXT_MAP)[name]
        entries = F.filter(
            F.from_json(value, _ENTRIES), lambda entry: entry.getField("key") == F.lit(name)
        )
        return F.coalesce(as_object, F.get(entries, 0).getField("value"))
    return F.lit(None)


def _field(schema: T.StructType, key: str) -> Column:
    """The value a key names, as text; null when the file has no such key."""
    fields = [f for f in schema.fields if f.name not in (CORRUPT, SOURCE_FILE)]
    found = _find(fields, key)
    if found is not None:
        return column(found.name).cast("string")
    properties = _find(fields, _PROPERTIES)
    if key.lower().startswith(_PROPERTY_PREFIX) and properties is not None:
        name = key[len(_PROPERTY_PREFIX) :]
        return _property(properties.dataType, column(properties.name), name)
    return F.lit(None).cast("string")


def entity_from_file(path: Column) -> Column:
    """The entity a file's name gives: its last path segment, decoded, without ``.json`` /
    ``.txt`` and ``.gz``; null for Service Bus Explorer's default ``BrokeredMessage_*`` name."""
    name = F.try_url_decode(F.regexp_extract(path, r"([^/\\]*)$", 1))
    stem = F.regexp_replace(name, r"(?i)(\.json|\.txt)?(\.gz)?$", "")
    return F.when(~stem.rlike(r"^BrokeredMessage_") & (stem != ""), stem)


class SbExplorerFormat:
    """Service Bus Explorer's JSON export of peeked messages (see the module docstring)."""

    name = "sb-explorer"
    expected = (
        "a Service Bus Explorer message export: a JSON object or array of objects with "
        "camelCase keys messageId, enqueuedTimeUtc, ..."
    )
    defaults: Mapping[str, str] = {
        "message_id": "messageId",
        "send_time": "enqueuedTimeUtc",
        "partition_key": "partitionKey",
        "session_id": "sessionId",
        "scheduled_enqueue_time": "scheduledEnqueueTimeUtc",
        "batch_id": "properties.BatchId",
    }

    def recognise(self, head: str) -> bool:
        """A JSON object or array whose first message has ``messageId`` and
        ``enqueuedTimeUtc`` (a body over 64 KiB before them hides them)."""
        text = head.lstrip("\ufeff \t\r\n")
        if text[:1] not in ("{", "[") or re.match(r'\{\s*"tables"\s*:', text):
            return False
        return all(key.search(text) for key in _HEAD_KEYS)

    def read(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        """Each file as one JSON document; an array gives a row per element, a damaged file
        one row holding its text in the corrupt record column."""
        return spark.read.options(
            multiLine=True, mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT
        ).json(paths)

    def records(
        self, raw: DataFrame, keys: Mapping[str, str], entity: str | None, *, keep: bool = False
    ) -> DataFrame:
        """One record per message object: canonical columns as text (sentinel scheduled times
        made null), ``sequence_number``, :data:`NOT_SEND` (null) and the corrupt record."""
        schema = raw.schema
        values = {c: _field(schema, k) for c, k in keys.items() if c in CANONICAL_COLUMNS}
        scheduled = values.get("scheduled_enqueue_time")
        if scheduled is not None:
            values["scheduled_enqueue_time"] = F.when(~scheduled.rlike(_SENTINEL_TIME), scheduled)
        named = [values["entity"]] if "entity" in values else []
        given = [F.lit(entity)] if entity is not None else []
        values["entity"] = F.coalesce(*named, *given, entity_from_file(column(SOURCE_FILE)))
        sequence = _field(schema, "sequenceNumber").try_cast("long")
        return raw.select(
            column(SOURCE_FILE),
            *(value.alias(name) for name, value in values.items()),
            sequence.alias("sequence_number"),
            F.lit(None).cast("string").alias(NOT_SEND),
            *([column(CORRUPT)] if CORRUPT in schema.names else []),
        )


SB_EXPLORER = SbExplorerFormat()
