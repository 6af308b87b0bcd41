"""Application Insights / Log Analytics dependency exports: one record per dependency row, the
Service Bus message rows being the sends.

Tables: the workspace table ``AppDependencies`` (``TimeGenerated``, ``DependencyType``,
``Target``, ``Properties``, ``Id``, ``ParentId``, ``OperationId``, ``AppRoleName``) and the
classic ``dependencies`` (``timestamp``, ``type``, ``target``, ``customDimensions``, ``id``,
``operation_ParentId``, ``operation_Id``, ``cloud_RoleName``). Column names match ignoring
case, ``_``, a byte-order mark and a `` [UTC]`` suffix; a ``[Local Time]`` time column is an
error, since local times without an offset cannot be placed on the UTC time line.

Two shapes:

- The portal's CSV export: RFC 4180 (quotes doubled inside quoted fields, so ``Properties`` is
  JSON text such as ``"{""MessageId"":""m1""}"``), often with a byte-order mark, time columns
  named ``TimeGenerated [UTC]`` and times written ``2/25/2025, 9:19:25.391 AM``: milliseconds
  only (seen in public exports; ISO 8601 text is read too).
- The query API's JSON (learn.microsoft.com/azure/azure-monitor/logs/api/response-format, the
  same shape as the older Application Insights REST API): ``{"tables": [{"name", "columns":
  [{"name", "type"}], "rows": [[...], ...]}]}``; rows are positional and read by the index of
  their column's name, per table. Times are ISO 8601 with up to 7 fractional digits; a
  ``dynamic`` column (``Properties``) is JSON text or an object.

Which rows are sends: ``DependencyType`` ``Queue Message | Azure Service Bus`` (.NET exporter),
``Queue Message | Microsoft.ServiceBus`` (Python exporter) and ``Queue Message | servicebus``
(an application's own PRODUCER span, as docs/instrumentation.md proposes). Every other row is
counted as not a send, with a reason naming its type: the SDK's call rows (``Azure Service
Bus``, ``Microsoft.ServiceBus``: a send, receive or settle call, whose messages have rows of
their own), HTTP, SQL. An SDK message row without a MessageId whose parent row (``ParentId``)
is an application message row that has one is not a send either: the SDKs start their message
span under the application's current span, so it is the same message twice.

Where the columns come from (``keys``, canonical column -> source key): a key naming a column
of the table reads it (``TimeGenerated``/``timestamp`` for ``send_time``, ``Target`` for
``entity``), any other key is a key of ``Properties``/``customDimensions`` (exact case).

- ``send_time``: ``TimeGenerated``/``timestamp``, the start of the dependency: for the SDK's
  message span, just before the message is sent (the exporters put the span's start there).
- ``entity``: from ``Target``, ``<namespace host>/<entity>`` as the exporters write it; the
  entity is everything after the host's ``/`` (entity names may hold ``/``, host names
  cannot). Older Python exporters wrote the host alone on message rows: then the property
  ``servicebus.entity``, else the user's ``entity``.
- ``message_id``, ``partition_key``, ``session_id``, ``scheduled_enqueue_time``, ``batch_id``:
  the properties ``MessageId``, ``PartitionKey``, ``SessionId``, ``ScheduledEnqueueTimeUtc``,
  ``BatchId``; with the default keys, the ``servicebus.*`` keys of docs/instrumentation.md are
  read where those are missing (``servicebus.message.id``, ...).
- ``batch_id``, when no property gives it: the ``Id`` of the SDK call row whose span links
  (``Properties["_MS.links"]``, a JSON list of ``{"operation_Id", "id"}``) name this message
  row. Not ``ParentId``: both the Python and the .NET SDK start the message spans before the
  send span and under the application's span, and link the send span to them
  (azure-servicebus ``_common/tracing.py``; Azure.Core ``MessagingClientDiagnostics.cs``).

Extra columns kept: ``operation_id``, ``dependency_id``, ``parent_id``, ``app_role``,
``dependency_type``, ``success``. A row whose ``Properties`` is not a JSON object is damaged:
its text goes to the corrupt record column.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import (
    CORRUPT,
    INSIGHTS_PROPERTIES,
    INSIGHTS_PROPERTIES_TEXT,
    NOT_SEND,
    column,
)
from dedup_lib.errors import InputError, printable
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.formats.insights_table import (
    RESPONSE,
    InsightsTable,
    normalise,
    query_rows,
)
from dedup_lib.telemetry.schema import CANONICAL_COLUMNS, TEXT_TIME_FORMAT

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Dependency types of one message's row: the sends.
SEND_TYPES = (
    "Queue Message | Azure Service Bus",
    "Queue Message | Microsoft.ServiceBus",
    "Queue Message | servicebus",
)
#: Dependency types of the SDKs' call rows (send, schedule, receive, settle).
CALL_TYPES = ("Azure Service Bus", "Microsoft.ServiceBus")
#: The portal's CSV time text, read as UTC.
PORTAL_TIME = "M/d/yyyy, h:mm:ss[.SSSSSSSSS] a XXX"
_PORTAL_LIKE = r"^\s*\d{1,2}/\d{1,2}/\d{4},"
#: The property naming the spans a call row links to, as a JSON list.
LINKS = "_MS.links"
_EXCERPT = 60

# Columns of the table, by role: the normalised names accepted, first found wins.
_TIME = ("timegenerated", "timestamp")
_TYPE = ("dependencytype", "type")
_TARGET = ("target",)
_PROPERTIES = ("properties", "customdimensions")
_EXTRA = {
    "operation_id": ("operationid",),
    "dependency_id": ("id",),
    "parent_id": ("parentid", "operationparentid"),
    "app_role": ("approlename", "cloudrolename"),
    "success": ("success",),
}
#: With the default keys, the docs/instrumentation.md property read where the default is absent.
_FALLBACKS = {
    "message_id": "servicebus.message.id",
    "partition_key": "servicebus.message.partition_key",
    "session_id": "servicebus.message.session_id",
    "scheduled_enqueue_time": "servicebus.message.scheduled_enqueue_time",
    "batch_id": "servicebus.batch.id",
}
_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
_LINK_LIST = T.ArrayType(
    T.StructType(
        [T.StructField("operation_Id", T.StringType()), T.StructField("id", T.StringType())]
    )
)


def portal_time(text: Column) -> Column:
    """The portal's ``5/25/2023, 4:32:49.469 AM`` (UTC) as ISO 8601 text; other text as it is,
    for the loader to parse or quarantine."""
    parsed = F.try_to_timestamp(F.concat(text, F.lit(" +00:00")), F.lit(PORTAL_TIME))
    iso = F.coalesce(F.date_format(parsed, TEXT_TIME_FORMAT), text)
    return F.when(text.rlike(_PORTAL_LIKE), iso).otherwise(text)


def entity_from_target(target: Column) -> Column:
    """``<namespace host>/<entity>`` -> ``<entity>`` (a scheme before the host is allowed);
    null when the target has no ``/`` after the host."""
    entity = F.regexp_extract(target, r"^(?:[A-Za-z][\w+.-]*://)?[^/]+/(.+?)/*$", 1)
    return F.when(entity != "", entity)


def _quoted(value: Column) -> Column:
    text = F.coalesce(value, F.lit(""))
    cut = F.when(F.length(text) > _EXCERPT, F.concat(F.substring(text, 1, _EXCERPT), F.lit("...")))
    return F.concat(F.lit("'"), F.coalesce(cut, text), F.lit("'"))


def _not_send(kind: Column) -> Column:
    """Why a row with dependency type ``kind`` is not a message send (null when it is)."""
    lowered = F.lower(F.trim(kind))
    return (
        F.when(lowered.isin(*(t.lower() for t in SEND_TYPES)), F.lit(None))
        .when(kind.isNull() | (F.trim(kind) == ""), F.lit("no dependency type"))
        .when(
            lowered.isin(*(t.lower() for t in CALL_TYPES)),
            F.concat(
                F.lit("dependency type "),
                _quoted(kind),
                F.lit(" is a Service Bus call (send, receive, settle), not a message"),
            ),
        )
        .otherwise(
            F.concat(
                F.lit("dependency type "),
                _quoted(kind),
                F.lit(" is not a Service Bus message"),
            )
        )
    )


class AppInsightsFormat:
    """Application Insights dependency rows, as the portal's CSV or the query API's JSON (see
    the module docstring)."""

    name = "app-insights"
    expected = (
        "an Application Insights / Log Analytics export of AppDependencies or dependencies: "
        "the portal's CSV, or the query API's JSON ({\"tables\": [...]})"
    )
    defaults: Mapping[str, str] = {
        "send_time": "TimeGenerated",
        "entity": "Target",
        "message_id": "MessageId",
        "partition_key": "PartitionKey",
        "session_id": "SessionId",
        "scheduled_enqueue_time": "ScheduledEnqueueTimeUtc",
        "batch_id": "BatchId",
    }

    def recognise(self, head: str) -> bool:
        """The query API's ``{"tables": ...``, or a CSV header with a time, a dependency type
        and a target column."""
        text = head.lstrip("\ufeff \t\r\n")
        if text.startswith("{"):
            return re.match(r'\{\s*"tables"\s*:', text) is not None
        try:
            header = next(csv.reader(io.StringIO(text.splitlines()[0] if text else "")), [])
        except csv.Error:
            return False
        names = {normalise(n) for n in header}
        return all(names & set(role) for role in (_TIME, _TYPE, _TARGET))

    def read(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        """JSON files (``.json``, ``.json.gz``) as whole documents, else CSV with a header (all
        text, quotes doubled inside quoted fields, every file with the first one's header, as
        Spark checks); one or the other, not both at once."""
        kinds = {_kind(p) for p in paths}
        if len(kinds) > 1:
            raise InputError(
                f"{self.name}: {printable(paths[0])} and others mix the portal's CSV and the "
                "query API's JSON; load each kind from its own folder"
            )
        reader = spark.read.options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
        if kinds == {"json"}:
            return reader.schema(RESPONSE).options(multiLine=True).json(paths)
        header = spark.read.options(header=True, escape='"').csv(paths[0]).schema.names
        schema = T.StructType(
            [T.StructField(n, T.StringType()) for n in header]
            + [T.StructField(CORRUPT, T.StringType())]
        )
        return (
            reader.schema(schema)
            .options(header=True, multiLine=True, escape='"', enforceSchema=False)
            .csv(paths)
        )

    def records(
        self, raw: DataFrame, keys: Mapping[str, str], entity: str | None, *, keep: bool = False
    ) -> DataFrame:
        """One record per dependency row (see the module docstring). The SDK's message rows
        and the calls' links are joined back to the rows: with ``keep``, the rows are parsed
        once and kept, not once per side (docs/decisions/query-shapes.md)."""
        if "tables" in raw.columns:
            table = InsightsTable(query_rows(raw))
        else:
            _refuse_local_times(raw, self.name)
            table = InsightsTable(raw)
        # Parsed once, in a projection Spark does not merge into the next (a dozen reads).
        text = table.value(*_PROPERTIES)
        frame = table.frame.select(
            "*",
            text.alias(INSIGHTS_PROPERTIES_TEXT),
            F.from_json(text, _TEXT_MAP).alias(INSIGHTS_PROPERTIES),
        )
        properties_text, properties = column(INSIGHTS_PROPERTIES_TEXT), column(INSIGHTS_PROPERTIES)
        kind = table.value(*_TYPE)

        values = _values(table, properties, keys, self.defaults, entity)
        damaged = F.when(
            F.trim(F.coalesce(properties_text, F.lit(""))) != "",
            F.when(
                properties.isNull(),
                F.concat(F.lit("Properties is not a JSON object: "), _quoted(properties_text)),
            ),
        )
        corrupt = F.coalesce(column(CORRUPT), F.when(_not_send(kind).isNull(), damaged)).alias(
            CORRUPT
        )
        links = F.when(
            F.lower(F.trim(kind)).isin(*(t.lower() for t in CALL_TYPES)),
            F.from_json(properties.getItem(LINKS), _LINK_LIST),
        )
        rows = frame.select(
            column(SOURCE_FILE),
            *(value.alias(name) for name, value in values.items()),
            *(table.value(*names).alias(name) for name, names in _EXTRA.items()),
            kind.alias("dependency_type"),
            links.alias("__links"),
            corrupt,
        )
        if keep:
            rows = rows.localCheckpoint()
        return _not_sends_marked(rows, list(values), default_batch="batch_id" in values)


def _values(
    table: InsightsTable,
    properties: Column,
    keys: Mapping[str, str],
    defaults: Mapping[str, str],
    entity: str | None,
) -> dict[str, Column]:
    """Each canonical column the records carry (not ``event_id``): read from the row's column
    of that name, else from its Properties; the defaults' fallbacks where the default key is
    empty; the user's ``entity`` where the row names none."""

    def source(canonical: str) -> Column:
        key = keys.get(canonical)
        if key is None:
            return F.lit(None).cast("string")
        name = normalise(key)
        if name in _TIME:
            return portal_time(table.value(*_TIME))
        if name in _TARGET and canonical == "entity":
            return entity_from_target(table.value(*_TARGET))
        present = table.has(name)
        if present is True:
            return table.value(name)
        found = properties.getItem(key)
        if present is not False:
            found = F.when(present, table.value(name)).otherwise(found)
        if canonical == "scheduled_enqueue_time":
            found = portal_time(found)
        return found

    values: dict[str, Column] = {}
    for canonical in CANONICAL_COLUMNS:
        if canonical == "event_id" or canonical not in keys:
            continue
        value = source(canonical)
        default = keys[canonical] == defaults.get(canonical)
        if default and canonical in _FALLBACKS:
            value = F.coalesce(value, properties.getItem(_FALLBACKS[canonical]))
        if canonical == "entity":
            value = F.coalesce(value, properties.getItem("servicebus.entity"))
            if entity is not None:
                value = F.coalesce(value, F.lit(entity))
        values[canonical] = value
    return values


def _not_sends_marked(rows: DataFrame, canonical: list[str], *, default_batch: bool) -> DataFrame:
    """The records with :data:`NOT_SEND`, the batch ids the call rows' links give, and the
    SDK message rows that repeat an application's message row marked as not sends."""
    kind = column("dependency_type")
    why = F.when(column(CORRUPT).isNull(), _not_send(kind))
    has_id = column("message_id").isNotNull() & (F.trim(column("message_id")) != "")
    sends = rows.where(why.isNull() & has_id).select(
        column("operation_id").alias("__app_operation"),
        column("dependency_id").alias("__app_id"),
    )
    parents = sends.where(column("__app_id").isNotNull()).distinct()
    linked = (
        rows.where(column("__links").isNotNull())
        .select(
            column("dependency_id").alias("__call_id"),
            F.explode(column("__links")).alias("__link"),
        )
        .groupBy(
            F.col("__link.operation_Id").alias("__link_operation"),
            F.col("__link.id").alias("__link_id"),
        )
        .agg(F.min("__call_id").alias("__call_id"))
    )
    joined = rows.join(
        parents,
        (column("parent_id") == column("__app_id"))
        & column("operation_id").eqNullSafe(column("__app_operation")),
        "left",
    ).join(
        linked,
        (column("dependency_id") == column("__link_id"))
        & column("operation_id").eqNullSafe(column("__link_operation")),
        "left",
    )
    repeated = F.when(
        ~has_id & column("__app_id").isNotNull(),
        F.concat(
            F.lit("the SDK's row of a message whose application row (Id "),
            _quoted(column("__app_id")),
            F.lit(") records it"),
        ),
    )
    batch = (
        [F.coalesce(column("batch_id"), column("__call_id")).alias("batch_id")]
        if (default_batch)
        else []
    )
    selected = [c for c in canonical if not (default_batch and c == "batch_id")]
    return joined.select(
        column(SOURCE_FILE),
        *(column(c) for c in selected),
        *batch,
        *(column(c) for c in _EXTRA),
        kind,
        F.coalesce(why, F.when(column(CORRUPT).isNull(), repeated)).alias(NOT_SEND),
        column(CORRUPT),
    )


def _kind(path: str) -> str:
    lower = path.lower().removesuffix(".gz")
    return "json" if lower.endswith(".json") else "csv"


def _refuse_local_times(raw: DataFrame, name: str) -> None:
    local = [c for c in raw.columns if re.search(r"(?i)\[local time\]\s*$", c)]
    if local and not any(normalise(c) in _TIME for c in raw.columns):
        first = raw.select(column(SOURCE_FILE)).first()
        where = printable(first[0]) if first is not None else "the export"
        raise InputError(
            f"{name}: {where} has times in local time ({printable(local[0])!r}), which cannot "
            "be placed on the UTC time line; export with the portal's time zone set to UTC, so "
            "the column reads 'TimeGenerated [UTC]'"
        )


APP_INSIGHTS = AppInsightsFormat()
