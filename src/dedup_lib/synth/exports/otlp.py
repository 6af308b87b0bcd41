"""Canonical telemetry written as OTLP JSON Lines, the way the Python SDK plus
docs/instrumentation.md would trace it: how the samples and the tests make trace files. The
reader is :mod:`dedup_lib.telemetry.formats.otlp`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.telemetry.formats.otlp import EVENT_ID_KEY, nonempty
from dedup_lib.telemetry.schema import TEXT_TIME_FORMAT
from dedup_lib.telemetry.times import parse_time
from dedup_lib.telemetry.write import one_file

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Spans per line (one ``TracesData`` each), as the Collector batches them.
SPANS_PER_LINE = 100


def _nanos(time: Column, raw: Column, shift_micros: int = 0) -> Column:
    """Epoch nanoseconds as OTLP writes them (decimal text); a time that does not parse is
    written as it came, so that the loader quarantines it with its value."""
    nanos = ((F.unix_micros(time) + F.lit(shift_micros)) * F.lit(1000)).cast("string")
    return F.coalesce(nanos, raw)


def _attribute(key: str, value: Column, kind: str = "stringValue") -> Column:
    text = value.cast("string")
    return F.when(
        text.isNotNull(),
        F.struct(
            F.lit(key).alias("key"),
            F.struct(
                *(
                    (text if name == kind else F.lit(None).cast("string")).alias(name)
                    for name in ("stringValue", "intValue")
                )
            ).alias("value"),
        ),
    )


def _attributes(*entries: Column) -> Column:
    return F.filter(F.array(*entries), lambda a: a.isNotNull())


def _hex_id(digits: int, *parts: Column) -> Column:
    first = F.lpad(F.hex(F.xxhash64(F.lit("a"), *parts)), 16, "0")
    if digits == 16:
        return F.lower(first)
    second = F.lpad(F.hex(F.xxhash64(F.lit("b"), *parts)), 16, "0")
    return F.lower(F.concat(first, second))


def _span(
    trace: Column,
    span_id: Column,
    parent: Column | None,
    name: Column,
    kind: int,
    start: Column,
    end: Column,
    attributes: Column,
    links: Column | None = None,
) -> Column:
    fields = [
        trace.alias("traceId"),
        span_id.alias("spanId"),
        (parent if parent is not None else F.lit(None).cast("string")).alias("parentSpanId"),
        name.alias("name"),
        F.lit(kind).alias("kind"),
        start.alias("startTimeUnixNano"),
        end.alias("endTimeUnixNano"),
        attributes.alias("attributes"),
    ]
    none = F.lit(None).cast("array<struct<traceId:string,spanId:string>>")
    fields.append((links if links is not None else none).alias("links"))
    fields.append(F.struct(F.lit(0).alias("code")).alias("status"))
    return F.struct(*fields)


def write_otlp(frame: DataFrame, path: str) -> None:
    """Canonical telemetry as OTLP JSON Lines, one file at ``path`` (gzip when it ends in
    ``.gz``, zstd for ``.zst`` as the Collector may write), the way the Python SDK plus
    docs/instrumentation.md would trace it.

    Per send call (the rows sharing an entity and ``batch_id``; a row without one is a call of
    its own): a CLIENT ``ServiceBus.send`` span ending at the send time and linking to one
    PRODUCER ``ServiceBus.message`` span per message, which carries ``messaging.system``,
    ``messaging.destination.name``, ``messaging.message.id`` and the ``servicebus.*`` keys
    (``event_id`` as ``servicebus.event_id``); and the SERVER span of the HTTP request that
    made the call, as a real application has. ``service.name`` is the ``sender`` column when
    there is one. Spans are grouped into ``TracesData`` lines per service and minute, about
    :data:`SPANS_PER_LINE` spans each, in time order. Times keep their microseconds."""
    messages = _messages(frame)
    trace = _hex_id(32, column("call"))
    calls = messages.groupBy("service", "entity", "call").agg(
        F.max("send_time").alias("end"),
        F.max("raw_time").alias("raw_end"),
        F.count(F.lit(1)).alias("count"),
        F.collect_list(
            F.struct(
                _hex_id(16, column("row"), F.lit("message")).alias("spanId"),
                _message_span(trace).alias("span"),
            )
        ).alias("messages"),
    )
    per_call = calls.select(
        "service",
        F.date_trunc("minute", column("end")).alias("minute"),
        column("end"),
        column("call"),
        F.concat(
            F.array(_send_span(trace)), F.transform(column("messages"), lambda m: m["span"])
        ).alias("sb"),
        _http_span(trace).alias("http"),
        (column("count") + 2).alias("spans"),
    )
    order = Window.partitionBy("service", "minute").orderBy("end", "call")
    lined = per_call.select(
        "*",
        F.floor(F.sum("spans").over(order) / F.lit(SPANS_PER_LINE)).alias("line"),
    )
    lines = lined.groupBy("service", "minute", "line").agg(
        F.min("end").alias("first"),
        F.flatten(F.collect_list("sb")).alias("sb"),
        F.collect_list("http").alias("http"),
    )
    out = lines.select(column("first"), F.to_json(_traces_data()).alias("value")).coalesce(1)
    writer = out.sortWithinPartitions("first").select("value").write.mode("overwrite")
    if path.endswith(".gz"):
        writer = writer.option("compression", "gzip")
    one_file(writer.text, path, "write_otlp")


def _messages(frame: DataFrame) -> DataFrame:
    """One row per message to trace: its service, entity, send call and row keys, its parsed
    and raw send time, and the values its span carries as text."""
    columns = set(frame.columns)
    types = {f.name: f.dataType for f in frame.schema.fields}
    send_type = types["send_time"]
    scheduled: Column = F.lit(None).cast("string")
    if "scheduled_enqueue_time" in types:
        value = column("scheduled_enqueue_time")
        parsed = parse_time(value, types["scheduled_enqueue_time"])
        scheduled = F.coalesce(F.date_format(parsed, TEXT_TIME_FORMAT), value.cast("string"))

    def opt(name: str) -> Column:
        return column(name) if name in columns else F.lit(None)

    row_key = (
        column("event_id").cast("string")
        if "event_id" in columns
        else F.monotonically_increasing_id().cast("string")
    )
    service = (
        F.coalesce(column("sender").cast("string"), F.lit("app"))
        if "sender" in columns
        else F.lit("app")
    )
    entity = F.coalesce(opt("entity").cast("string"), F.lit(""))
    # A message whose own time does not parse gets a send call of its own: in a batch's call
    # it would take the call's (parseable) time, and load where the input was quarantined.
    in_batch = F.when(
        parse_time(column("send_time"), send_type).isNotNull(),
        F.concat(F.lit("b:"), entity, F.lit("/"), opt("batch_id").cast("string")),
    )
    return frame.select(
        service.alias("service"),
        entity.alias("entity"),
        F.coalesce(in_batch, F.concat(F.lit("r:"), row_key)).alias("call"),
        row_key.alias("row"),
        parse_time(column("send_time"), send_type).alias("send_time"),
        column("send_time").cast("string").alias("raw_time"),
        opt("message_id").cast("string").alias("message_id"),
        opt("partition_key").cast("string").alias("partition_key"),
        opt("session_id").cast("string").alias("session_id"),
        scheduled.alias("scheduled"),
        opt("batch_id").cast("string").alias("batch_id"),
        opt("event_id").cast("long").alias("event_id"),
    ).where(column("raw_time").isNotNull())


def _message_span(trace: Column) -> Column:
    """A message's PRODUCER span, with the keys docs/instrumentation.md adds."""
    return _span(
        trace,
        _hex_id(16, column("row"), F.lit("message")),
        _hex_id(16, column("call"), F.lit("http")),
        F.lit("ServiceBus.message"),
        4,
        _nanos(column("send_time"), column("raw_time"), -3000),
        _nanos(column("send_time"), column("raw_time"), -3000),
        _attributes(
            _attribute("az.namespace", F.lit("Microsoft.ServiceBus")),
            _attribute("messaging.system", F.lit("servicebus")),
            _attribute("messaging.destination.name", nonempty(column("entity"))),
            _attribute("messaging.message.id", column("message_id")),
            _attribute("servicebus.message.id", column("message_id")),
            _attribute("servicebus.message.partition_key", column("partition_key")),
            _attribute("servicebus.message.session_id", column("session_id")),
            _attribute("servicebus.message.scheduled_enqueue_time", column("scheduled")),
            _attribute("servicebus.batch.id", column("batch_id")),
            _attribute(EVENT_ID_KEY, column("event_id"), "intValue"),
        ),
    )


def _send_span(trace: Column) -> Column:
    """A send call's CLIENT span, linking to its messages' spans."""
    return _span(
        trace,
        _hex_id(16, column("call"), F.lit("send")),
        _hex_id(16, column("call"), F.lit("http")),
        F.lit("ServiceBus.send"),
        3,
        _nanos(column("end"), column("raw_end"), -5000),
        _nanos(column("end"), column("raw_end")),
        _attributes(
            _attribute("az.namespace", F.lit("Microsoft.ServiceBus")),
            _attribute("messaging.system", F.lit("servicebus")),
            _attribute("messaging.operation", F.lit("publish")),
            _attribute("message_bus.destination", nonempty(column("entity"))),
            _attribute("peer.address", F.lit("example.servicebus.windows.net")),
            _attribute(
                "messaging.batch.message_count",
                F.when(column("count") > 1, column("count")),
                "intValue",
            ),
        ),
        F.transform(
            column("messages"),
            lambda m: F.struct(trace.alias("traceId"), m["spanId"].alias("spanId")),
        ),
    )


def _http_span(trace: Column) -> Column:
    """The SERVER span of the HTTP request that made a send call."""
    return _span(
        trace,
        _hex_id(16, column("call"), F.lit("http")),
        None,
        F.lit("POST /orders"),
        2,
        _nanos(column("end"), column("raw_end"), -9000),
        _nanos(column("end"), column("raw_end"), 2000),
        _attributes(
            _attribute("http.request.method", F.lit("POST")),
            _attribute("http.route", F.lit("/orders")),
            _attribute("http.response.status_code", F.lit(202), "intValue"),
        ),
    )


def _traces_data() -> Column:
    """A line's ``TracesData``: one resource (the service) with its Service Bus spans and its
    HTTP spans, each under its instrumentation scope."""
    resource = _attributes(
        _attribute("service.name", column("service")),
        _attribute("telemetry.sdk.language", F.lit("python")),
    )
    flask = F.struct(F.lit("opentelemetry.instrumentation.flask").alias("name"))
    return F.struct(
        F.array(
            F.struct(
                F.struct(resource.alias("attributes")).alias("resource"),
                F.array(
                    F.struct(
                        F.struct(F.lit("azure.servicebus").alias("name")).alias("scope"),
                        column("sb").alias("spans"),
                    ),
                    F.struct(flask.alias("scope"), column("http").alias("spans")),
                ).alias("scopeSpans"),
            )
        ).alias("resourceSpans")
    )
