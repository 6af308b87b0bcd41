"""OpenTelemetry traces as the Collector's ``file`` exporter writes them: OTLP JSON Lines, one
``TracesData`` per line (``resourceSpans[].scopeSpans[].spans[]``), plain or gzip.

What the Azure SDKs write (read in their sources): Python ``azure-servicebus``
(``_common/tracing.py``) opens a ``ServiceBus.message`` span, kind PRODUCER, per message (when it
is added to a batch, or sent or scheduled alone) with ``az.namespace=Microsoft.ServiceBus`` and
``messaging.system=servicebus``, and one ``ServiceBus.send`` / ``ServiceBus.schedule`` span, kind
CLIENT, per call, whose ``links`` are the message spans and which carries
``messaging.operation=publish``, ``message_bus.destination`` and ``peer.address``. .NET
``Azure.Messaging.ServiceBus`` does the same with ``Message`` (Producer) and
``ServiceBusSender.Send`` / ``ServiceBusSender.Schedule`` (Client). Neither puts the MessageId
on a span: docs/instrumentation.md has the application add it, on the SDK's pattern.

A record is a span. It is a send when it is a Service Bus span (``messaging.system``
``servicebus`` or the older ``azure_servicebus``, or ``az.namespace=Microsoft.ServiceBus``) that
is not a send call and is of kind PRODUCER or carries a MessageId. Everything else is counted
and skipped with a reason (:data:`~dedup_lib.columns.NOT_SEND`): other systems'
spans, send calls (their messages are the records), receives and settles. The SDK's own message
span without a MessageId is skipped too when a span of its trace carries one (the
application's span for the same message, docs/instrumentation.md); alone, it is a send without
a MessageId.

Columns: ``send_time`` is the end of the earliest-ending send call linking to the message span
(the broker had the message by then), else the message span's start. ``batch_id`` is the
attribute ``servicebus.batch.id`` when set, else that send call's ``spanId`` (a send call is
one batch; ``send_span_id`` keeps it either way), null when no call links to the span. A
message span linked from two calls (a batch object sent again after a timeout) is one record,
with the earlier call: a limit of reading spans, since the second send of the same spans has
no span of its own. Attributes are looked up on the span, then on its resource; ``entity``
falls back to the linking call's. ``event_id`` is read as a 64-bit integer (the writer puts it
in ``servicebus.event_id`` as an ``intValue``). Extra columns: ``trace_id``, ``span_id``,
``send_span_id``, ``span_name``, ``service_name``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT, NOT_SEND, TRACE, column
from dedup_lib.telemetry.formats import SOURCE_FILE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


_VALUE_FIELDS = (
    "stringValue",
    "intValue",
    "boolValue",
    "doubleValue",
    "arrayValue",
    "kvlistValue",
    "bytesValue",
)
#: Every scalar as text: Spark's JSON reader gives a number's or an object's JSON text for a
#: string field, so ``intValue`` written as a number or a string reads the same.
_ANY_VALUE = T.StructType([T.StructField(f, T.StringType()) for f in _VALUE_FIELDS])
_ATTRIBUTES = T.ArrayType(
    T.StructType([T.StructField("key", T.StringType()), T.StructField("value", _ANY_VALUE)])
)
_LINK = T.StructType(
    [
        T.StructField("traceId", T.StringType()),
        T.StructField("spanId", T.StringType()),
        T.StructField("attributes", _ATTRIBUTES),
    ]
)
_SPAN = T.StructType(
    [
        T.StructField("traceId", T.StringType()),
        T.StructField("spanId", T.StringType()),
        T.StructField("parentSpanId", T.StringType()),
        T.StructField("name", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("startTimeUnixNano", T.StringType()),
        T.StructField("endTimeUnixNano", T.StringType()),
        T.StructField("attributes", _ATTRIBUTES),
        T.StructField("links", T.ArrayType(_LINK)),
        T.StructField(
            "status",
            T.StructType(
                [T.StructField("code", T.StringType()), T.StructField("message", T.StringType())]
            ),
        ),
    ]
)
_SCOPE = T.StructType(
    [T.StructField("name", T.StringType()), T.StructField("version", T.StringType())]
)
TRACES_DATA = T.StructType(
    [
        T.StructField(
            "resourceSpans",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField(
                            "resource", T.StructType([T.StructField("attributes", _ATTRIBUTES)])
                        ),
                        T.StructField(
                            "scopeSpans",
                            T.ArrayType(
                                T.StructType(
                                    [
                                        T.StructField("scope", _SCOPE),
                                        T.StructField("spans", T.ArrayType(_SPAN)),
                                    ]
                                )
                            ),
                        ),
                    ]
                )
            ),
        ),
        T.StructField(CORRUPT, T.StringType()),
    ]
)

SERVICEBUS_SYSTEMS = ("servicebus", "azure_servicebus")
SEND_CALL_NAMES = (
    "ServiceBus.send",
    "ServiceBus.schedule",
    "ServiceBusSender.Send",
    "ServiceBusSender.Schedule",
)
SDK_MESSAGE_NAMES = ("ServiceBus.message", "Message")
_KINDS = {
    "1": "internal",
    "2": "server",
    "3": "client",
    "4": "producer",
    "5": "consumer",
}
#: Keys tried after the default one (never after a key the user mapped).
FALLBACKS: dict[str, tuple[str, ...]] = {
    "message_id": ("servicebus.message.id",),
    "entity": ("servicebus.entity", "message_bus.destination"),
}
_COMPUTED = ("send_time", "batch_id")
EVENT_ID_KEY = "servicebus.event_id"

_ROW = "__otlp_row"
_RES = "__otlp_resource"
_SPAN_COL = "__otlp_span"
_NO_TRACES = "__otlp_no_traces"
_ATTR = "__otlp_attr_"


def _value(entry: Column) -> Column:
    return F.coalesce(*(entry["value"][f] for f in _VALUE_FIELDS))


def _lookups(attributes: Column, keys: list[str]) -> Column:
    """The values of ``keys`` in an OTLP attribute list, as text (the first entry of a key
    that is repeated): a struct with field ``k<i>`` for ``keys[i]``. Each entry's value is made
    text once (one lambda over the list), then each key is found with ``array_position`` in
    the list's keys: the fastest shape with Spark's generated code that is not much slower
    interpreted (docs/decisions/query-shapes.md)."""
    texts = F.transform(attributes, _value)
    names = attributes.getField("key")
    return F.struct(
        *(
            F.get(texts, F.array_position(names, F.lit(k)) - 1).alias(f"k{i}")
            for i, k in enumerate(keys)
        )
    )


def _kind(value: Column) -> Column:
    """A span kind, given as its number or as its enum name (``SPAN_KIND_PRODUCER``), in
    lower case."""
    text = F.lower(F.trim(value))
    named = F.regexp_replace(text, "^span_kind_", "")
    by_number = F.element_at(F.create_map(*(F.lit(x) for kv in _KINDS.items() for x in kv)), text)
    return F.coalesce(by_number, named)


def nonempty(value: Column) -> Column:
    """The value, null where it is empty or blank text."""
    return F.when(F.trim(value) != "", value)


class OtlpFormat:
    """OTLP JSON Lines traces (see the module docstring for what a record is)."""

    name = "otlp"
    expected = (
        "OTLP JSON Lines (one TracesData per line), as the Collector's file exporter writes them"
    )
    defaults: Mapping[str, str] = {
        "message_id": "messaging.message.id",
        "entity": "messaging.destination.name",
        "partition_key": "servicebus.message.partition_key",
        "session_id": "servicebus.message.session_id",
        "scheduled_enqueue_time": "servicebus.message.scheduled_enqueue_time",
        "batch_id": "servicebus.batch.id",
        "event_id": EVENT_ID_KEY,
    }

    def recognise(self, head: str) -> bool:
        start = head.lstrip("\ufeff \t\r\n")
        return start.startswith("{") and '"resourceSpans"' in start

    def read(self, spark: SparkSession, paths: list[str]) -> DataFrame:
        return (
            spark.read.schema(TRACES_DATA)
            .options(mode="PERMISSIVE", columnNameOfCorruptRecord=CORRUPT)
            .json(paths)
        )

    def records(
        self, raw: DataFrame, keys: Mapping[str, str], entity: str | None, *, keep: bool = False
    ) -> DataFrame:
        joined = _with_calls(self._spans(raw, keys))
        has_id = nonempty(column("message_id")).isNotNull()
        producer = column("__kind") == "producer"
        is_message = column("__sb") & ~column("__call") & (producer | has_id)
        trace_has_id = F.max((is_message & has_id).cast("int")).over(
            Window.partitionBy(column(TRACE))
        )
        name = F.coalesce(column("span_name"), F.lit("(no name)"))
        not_send = (
            F.when(column(CORRUPT).isNotNull(), F.lit(None).cast("string"))
            .when(column(_NO_TRACES), F.lit("JSON line without resourceSpans (not OTLP traces)"))
            .when(~column("__sb"), F.concat(F.lit("not a Service Bus span: "), name))
            .when(
                column("__call"),
                F.concat(F.lit("Service Bus send call (its messages are counted): "), name),
            )
            .when(~is_message, F.concat(F.lit("Service Bus span, not a message send: "), name))
            .when(
                ~has_id & column("span_name").isin(*SDK_MESSAGE_NAMES) & (trace_has_id == 1),
                F.lit("SDK message span; the application's span in its trace has the MessageId"),
            )
        )
        user_entity = [F.lit(entity)] if entity is not None else []
        out: dict[str, Column] = {
            "message_id": column("message_id"),
            "send_time": (
                column("send_time")
                if "send_time" in keys
                else F.coalesce(column("__call_end"), column("__start"))
            ),
            "entity": F.coalesce(
                nonempty(column("entity")), nonempty(column("__call_entity")), *user_entity
            ),
            "batch_id": F.coalesce(nonempty(column("batch_id")), column("__call_span")),
            "event_id": column("event_id").try_cast("long"),
        }
        extra = [c for c in keys if c not in out]
        return joined.select(
            *(v.alias(k) for k, v in out.items()),
            *(column(c) for c in extra),
            column("trace_id"),
            column("span_id"),
            column("__call_span").alias("send_span_id"),
            column("span_name"),
            column("service_name"),
            not_send.alias(NOT_SEND),
            column(CORRUPT),
            column(SOURCE_FILE),
        )

    def _spans(self, raw: DataFrame, keys: Mapping[str, str]) -> DataFrame:
        """One row per span (and per damaged or non-traces line), with the attributes the
        records need looked up once."""
        spans = _flattened(raw)
        span = F.col(_SPAN_COL)
        wanted = _wanted(keys)
        spans = spans.select(
            "*",
            _lookups(span["attributes"], wanted).alias("__span_attrs"),
            _lookups(column(_RES), wanted).alias("__resource_attrs"),
        )

        def attr(key: str, on: tuple[str, ...] = ("__span_attrs", "__resource_attrs")) -> Column:
            field = f"k{wanted.index(key)}"
            return F.coalesce(*(nonempty(F.col(name)[field]) for name in on))

        looked: dict[str, Column] = {}
        for canonical, key in keys.items():
            value = attr(key)
            if key == self.defaults.get(canonical):
                value = F.coalesce(value, *(attr(k) for k in FALLBACKS.get(canonical, ())))
            looked[canonical] = value
        if "entity" not in looked:
            looked["entity"] = F.lit(None).cast("string")
        system = F.lower(attr("messaging.system"))
        sb = system.isin(*SERVICEBUS_SYSTEMS) | (attr("az.namespace") == "Microsoft.ServiceBus")
        kind = _kind(span["kind"])
        operation = F.lower(
            F.coalesce(attr("messaging.operation.type"), attr("messaging.operation"))
        )
        call = (
            sb
            & (kind == "client")
            & (span["name"].isin(*SEND_CALL_NAMES) | operation.isin("publish", "send"))
        )
        return spans.select(
            column(SOURCE_FILE),
            column(CORRUPT),
            column(_NO_TRACES),
            F.lower(span["traceId"]).alias("trace_id"),
            F.lower(span["spanId"]).alias("span_id"),
            span["name"].alias("span_name"),
            span["startTimeUnixNano"].alias("__start"),
            span["endTimeUnixNano"].alias("__end"),
            span["links"].alias("__links"),
            attr("service.name", ("__resource_attrs",)).alias("service_name"),
            kind.alias("__kind"),
            F.coalesce(sb, F.lit(False)).alias("__sb"),
            F.coalesce(call, F.lit(False)).alias("__call"),
            *(v.alias(k) for k, v in looked.items()),
        )


def _with_calls(spans: DataFrame) -> DataFrame:
    """Each span with the send call that links to it, if any: the earliest-ending such call
    (ties: the smaller span id), its span id (``__call_span``), end and entity.

    One read of the spans: each span stands for itself, and a send call also for each of its
    links, keyed by the span linked to; a window per key finds the earliest call. A join of
    the spans with the calls read the files twice (twice the JSON parsed)."""
    call = F.struct(
        column("__end").try_cast("decimal(38,0)").alias("at"),
        column("span_id").alias("span"),
        column("__end").alias("end"),
        nonempty(column("entity")).alias("entity"),
    )
    own = F.struct(
        F.lit(True).alias("own"),
        column("trace_id").alias("trace"),
        column("span_id").alias("span"),
        F.when(F.lit(False), call).alias("call"),
    )
    links_type = spans.schema["__links"].dataType
    links = F.coalesce(F.when(column("__call"), column("__links")), F.array().cast(links_type))
    linked = F.transform(
        links,
        lambda link: F.struct(
            F.lit(False).alias("own"),
            F.lower(link["traceId"]).alias("trace"),
            F.lower(link["spanId"]).alias("span"),
            call.alias("call"),
        ),
    )
    entries = spans.select("*", F.explode(F.concat(F.array(own), linked)).alias("__entry"))
    trace, span = F.col("__entry.trace"), F.col("__entry.span")
    earliest = F.when(
        trace.isNotNull() & span.isNotNull(),
        F.min(F.col("__entry.call")).over(Window.partitionBy(trace, span)),
    )
    return (
        entries.repartition(trace)  # one shuffle for this window and the one per trace after
        .select("*", earliest.alias("__first"))
        .where(F.col("__entry.own"))
        .select(
            *(column(c) for c in spans.columns),
            trace.alias(TRACE),
            F.col("__first.span").alias("__call_span"),
            F.col("__first.end").alias("__call_end"),
            F.col("__first.entity").alias("__call_entity"),
        )
    )


def _flattened(raw: DataFrame) -> DataFrame:
    """One row per span of the raw read (resource attributes beside it), and one per damaged
    line or line without traces, so that none is lost."""
    lines = raw.select(
        column(SOURCE_FILE),
        column(CORRUPT),
        (column(CORRUPT).isNull() & F.col("resourceSpans").isNull()).alias(_NO_TRACES),
        F.explode_outer("resourceSpans").alias("__rs"),
    )
    scopes = lines.select(
        column(SOURCE_FILE),
        column(CORRUPT),
        column(_NO_TRACES),
        F.col("__rs.resource.attributes").alias(_RES),
        F.explode_outer("__rs.scopeSpans").alias("__ss"),
    )
    return scopes.select(
        column(SOURCE_FILE),
        column(CORRUPT),
        column(_NO_TRACES),
        column(_RES),
        F.explode_outer("__ss.spans").alias(_SPAN_COL),
    ).where(F.col(_SPAN_COL).isNotNull() | column(CORRUPT).isNotNull() | column(_NO_TRACES))


def _wanted(keys: Mapping[str, str]) -> list[str]:
    """Every attribute key the records read: the columns' keys, their fallbacks, and those
    that tell a Service Bus send call and the service."""
    return list(
        dict.fromkeys(
            [
                *keys.values(),
                *(k for fallback in FALLBACKS.values() for k in fallback),
                "messaging.system",
                "az.namespace",
                "messaging.operation.type",
                "messaging.operation",
                "service.name",
            ]
        )
    )


OTLP = OtlpFormat()
