"""Spark column expressions every layer uses: a column by its exact name, a wall clock read as
UTC, a conditional count; Spark's ``xxhash64`` of a text, computed on the driver; and the
names of the library's internal columns, in one place."""

from __future__ import annotations

import xxhash
from pyspark.sql import Column
from pyspark.sql import functions as F

# The library's own columns, added to a frame for a while and dropped before anyone sees it,
# all here so that no two mean different things under one name. Each begins with INTERNAL,
# which no input column may (docs/glossary.md, "internal column").

#: The prefix of every internal column; an input column that begins with it is refused.
INTERNAL = "__dedup_"

# The replay (dedup_lib.replay).
#: The send's position in the input, negated (-position - 1) for sends decided before the
#: pass: one column through the shuffle instead of two.
POS = INTERNAL + "pos"
#: Whether the send is judged by the window (eligible), or decided by the rules alone.
JUDGED = INTERNAL + "judged"
#: The send time as a UTC timestamp, where the input's is a wall clock (``timestamp_ntz``).
UTC_TIME = INTERNAL + "time"
#: The window of the send's entity, in microseconds (per-entity policies).
WINDOW = INTERNAL + "window"
#: True for a send that travelled in a batch the batch rule refuses.
MIXED_BATCH = INTERNAL + "mixed_batch"

# Reading telemetry (dedup_lib.telemetry).
#: A line Spark could not parse, as read.
CORRUPT = INTERNAL + "corrupt_record"
#: The number of a plain format's file (``files.file_id``), for the load's count per file.
FILE_ID = INTERNAL + "file_id"
#: Why a record is not a message send (a span of another system), or null for sends.
NOT_SEND = INTERNAL + "not_send"
#: Prefixes of a time column's parsed value, its "never" sentinel, its number and its text.
PARSED = INTERNAL + "parsed_"
NEVER = INTERNAL + "never_"
NUMBER = INTERNAL + "number_"
TEXT = INTERNAL + "text_"
#: The load's tally: why a row was quarantined, and its file.
TALLY_WHY = INTERNAL + "why"
TALLY_FILE = INTERNAL + "file"
#: An App Insights row's property names and values, as arrays.
INSIGHTS_NAMES = INTERNAL + "names"
INSIGHTS_ROW = INTERNAL + "row"
#: An App Insights row's Properties (customDimensions), as its text and parsed once.
INSIGHTS_PROPERTIES_TEXT = INTERNAL + "properties_text"
INSIGHTS_PROPERTIES = INTERNAL + "properties"
#: The trace an OTLP span's rows are grouped by (its own; a link's, for a send call's).
TRACE = INTERNAL + "trace"

# The live monitor (dedup_lib.live).
#: The prefix of a quarantined row's columns, as read, beside the valid rows' typed ones.
QUARANTINED = INTERNAL + "q_"
#: Whether a row of a micro-batch loaded as valid.
VALID = INTERNAL + "valid"
#: The send time in microseconds since the epoch.
SEND_MICROS = INTERNAL + "micros"
#: Whether Spark SQL decided the send already (rejected, without MessageId, detection off).
DECIDED = INTERNAL + "decided"
#: The send's dedup key as 128 bits: Spark's ``xxhash64`` of (entity, dedup key), and of the
#: same after a constant (a second seed). Null for decided sends.
K0 = INTERNAL + "k0"
K1 = INTERNAL + "k1"
#: What the message carries (``analysis.diagnostics.content_key``), and the same 128-bit
#: hash of (entity, content), by which resends are found.
KEYED_CONTENT = INTERNAL + "content"
C0 = INTERNAL + "c0"
C1 = INTERNAL + "c1"
#: The original's content, beside the send's, for the collision alerts (not written).
ORIGINAL_CONTENT = INTERNAL + "original_content"

# The sweep and the analyses (dedup_lib.sweep, dedup_lib.analysis).
#: A rejected send's logical_id, in the sweep's count of every send.
REJECTED_ID = INTERNAL + "rejected_id"
#: A send's rank within its key, and the position of the key's next send (sweep.spark_road).
RANK = INTERNAL + "rank"
NEXT = INTERNAL + "next"
#: Whether a send has no ``event_id`` (those come last among sends of the same time).
NO_EVENT_ID = INTERNAL + "no_event_id"
#: 64-bit hashes of a send's key and of its content group, sorted on before the texts.
KEY_HASH = INTERNAL + "key_hash"
GROUP_HASH = INTERNAL + "group_hash"
#: Whether an entity of the sends is one the broker's export covers (reconcile).
COVERED = INTERNAL + "covered_entity"
#: Which capacity a row of ``count_sweep``'s stacked results was judged at.
CAPACITY = INTERNAL + "capacity"


def column(name: str) -> Column:
    """A column by its exact name: ``payload.v`` is that column, not field ``v`` of a struct."""
    return F.col("`" + name.replace("`", "``") + "`")


def utc_wall_clock(value: Column) -> Column:
    """A ``timestamp_ntz`` (a wall clock without zone) read as UTC, whatever the session time
    zone; null where it does not parse."""
    return F.concat(value.cast("string"), F.lit("Z")).try_cast("timestamp")


def count_where(condition: Column) -> Column:
    """How many rows of a group meet ``condition`` (null counts as not)."""
    return F.count(F.when(condition, True))


def spark_xxhash64(text: str) -> int:
    """Spark's ``xxhash64`` of a string (XXH64 of its UTF-8 bytes, seed 42, as a signed long),
    without a Spark job: a collect of even a one-row local table is a job's planning."""
    value = xxhash.xxh64_intdigest(text.encode("utf-8"), seed=42)
    return value - (1 << 64) if value >= 1 << 63 else value
