"""Every record a load reads, counted per file and fate (valid, quarantined, skipped) in one
Spark job, and checked to add up: no row is lost without a word. Also the errors only the
counts can tell: a file of sends without any MessageId, files without any send."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import functions as F

from dedup_lib.columns import column
from dedup_lib.errors import DedupLibError, InputError, excerpt, printable
from dedup_lib.telemetry.files import file_key
from dedup_lib.telemetry.formats import NOT_SEND, SOURCE_FILE
from dedup_lib.telemetry.loaded import KINDS
from dedup_lib.telemetry.quarantine import REASON, category
from dedup_lib.telemetry.schema import GUIDE, LOADER
from dedup_lib.telemetry.sources import CORRUPT, reading

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame

    from dedup_lib.telemetry.files import InputFiles
    from dedup_lib.telemetry.formats import RecordFormat

_WHY = "__dedup_why"
_SEEN = "__dedup_seen"


def union(frames: list[DataFrame]) -> DataFrame:
    """The frames' rows under the union of their columns (null where a frame lacks one)."""
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def check_adds_up(where: str, counts: Mapping[str, int], reasons: int | None = None) -> None:
    """An error when the records valid, quarantined and skipped do not add up to the records
    read, or (``reasons``: how many have a known reason) the quarantined ones to their
    reasons: rows would be lost without a word."""
    valid, quarantined, skipped = counts["valid"], counts["quarantined"], counts["skipped"]
    if counts["read"] == valid + quarantined + skipped and reasons in (None, quarantined):
        return
    known = "" if reasons is None else f" ({reasons} with a known reason)"
    raise DedupLibError(
        f"{LOADER}: rows would be lost in {where}: {counts['read']} read, but {valid} valid, "
        f"{quarantined} quarantined{known} and {skipped} skipped. This is a bug in dedup_lib; "
        "please report it with the file."
    )


def _every_value(frame: DataFrame) -> Column:
    """A hash of every column of a row: so the tally decodes every value, and a file whose
    data pages are damaged fails while loading, not in the middle of an analysis."""
    values = [
        F.to_json(column(f.name)) if "map<" in f.dataType.simpleString() else column(f.name)
        for f in frame.schema.fields
        if f.name != SOURCE_FILE
    ]
    return F.xxhash64(*values) if values else F.lit(0)


@dataclass(frozen=True)
class Tally:
    """Records per file (``read``, ``valid``, ``quarantined``, ``skipped``), per file the
    sends and the sends with a MessageId (structured formats only), and the quarantined and
    skipped records per reason category (``kind``, ``reason``, ``count``)."""

    table: pd.DataFrame
    sends: dict[str, tuple[int, int]]
    reasons: pd.DataFrame


def tally(
    files: InputFiles,
    read: DataFrame,
    judged: DataFrame,
    fmt: str,
    expected: str | None = None,
    skipped: Column | None = None,
) -> Tally:
    """Records per file: read (counted from what was read, nothing judged), valid, quarantined
    and skipped (each counted, none inferred from the others), in one Spark job; an error when
    a file's valid, quarantined and skipped records do not add up to its records read."""
    with reading(files, fmt, LOADER, expected):
        rows = _counts(read, judged, skipped).collect()
    names = (*KINDS, "send", "identified")
    counted: dict[str, dict[str, int]] = {file_key(f): dict.fromkeys(names, 0) for f in files.files}
    by_reason: dict[tuple[str, str], int] = {}
    for file, kind, reason, count, _ in rows:
        counts = counted.setdefault(file_key(file), dict.fromkeys(names, 0))
        counts[kind] += int(count)
        if kind in ("quarantined", "skipped"):
            by_reason[kind, reason] = by_reason.get((kind, reason), 0) + int(count)
    table = pd.DataFrame(
        [{"file": files.name(f), **{k: c[k] for k in KINDS}} for f, c in counted.items()],
        columns=["file", *KINDS],
    )
    for record in table.to_dict("records"):
        check_adds_up(str(record["file"]), {k: int(record[k]) for k in KINDS})
    sends = {files.name(f): (c["send"], c["identified"]) for f, c in counted.items()}
    reasons = pd.DataFrame(
        [{"kind": k, REASON: r, "count": n} for (k, r), n in by_reason.items()],
        columns=["kind", REASON, "count"],
    )
    return Tally(table, sends, reasons)


def _counts(read: DataFrame, judged: DataFrame, skipped: Column | None) -> DataFrame:
    """Records per file, kind and reason category (``read``, ``valid``, ``quarantined``,
    ``skipped``; for a structured format also ``send`` and ``identified``: sends with a
    MessageId), as one plan; its last column is the largest hash of a file's values, so that
    every value is decoded."""
    kind = F.when(column(REASON).isNull(), F.lit("valid")).otherwise(F.lit("quarantined"))
    why = F.when(column(REASON).isNotNull(), category(column(REASON)))
    kinds = [kind]
    # A structured format's records are built from fully parsed lines (its read counts them):
    # hashing every derived value again would cost several times the load and find nothing.
    seen = _every_value(judged) if skipped is None else F.lit(0).cast("long")
    if skipped is not None:
        why = F.when(skipped, category(column(NOT_SEND))).otherwise(why)
        send = ~skipped & column(CORRUPT).isNull()
        identified = F.trim(column("message_id").cast("string")) != ""
        kinds = [
            F.when(skipped, F.lit("skipped")).otherwise(kind),
            F.when(send, F.lit("send")),
            F.when(send & identified, F.lit("identified")),
        ]
    every = F.explode(F.array_compact(F.array(*kinds)))
    nothing = F.lit(None).cast("string")
    parts = [
        read.select(column(SOURCE_FILE), F.lit("read"), nothing, F.lit(0).cast("long")),
        judged.select(
            column(SOURCE_FILE), every.alias("kind"), why.alias(_WHY), seen.alias(_SEEN)
        ).select(
            column(SOURCE_FILE),
            "kind",
            F.when(F.col("kind").isin("quarantined", "skipped"), F.col(_WHY)),
            _SEEN,
        ),
    ]
    return (
        union([p.toDF(SOURCE_FILE, "kind", REASON, "seen") for p in parts])
        .groupBy(SOURCE_FILE, "kind", REASON)
        .agg(F.count(F.lit(1)), F.max("seen"))  # the hash is used, so every value is read
    )


def no_message_ids(
    sends: dict[str, tuple[int, int]], record_format: RecordFormat, key: str
) -> None:
    """An error for the first file that has sends but no MessageId on any of them."""
    for name, (count, identified) in sends.items():
        if count and not identified:
            raise InputError(
                f"{LOADER}: {name} has {count:,} {record_format.name} send(s) but none "
                f"carries a MessageId under {key!r}; if yours are under another key, pass "
                f"mapping={{'<your key>': 'message_id'}}; {GUIDE} says how to add it "
                "(the Azure SDKs do not)"
            )


def no_sends(
    table: pd.DataFrame, record_format: RecordFormat, path: str, not_sends: DataFrame
) -> None:
    """An error when a structured format's files hold records but no message send at all:
    the wrong format was named, or the traces come from an app that sends none."""
    read, skipped = int(table["read"].sum()), int(table["skipped"].sum())
    if read and read == skipped:
        reasons = not_sends.groupBy(REASON).count().orderBy(F.desc("count")).limit(3).collect()
        seen = ", ".join(f"{excerpt(r[0])}: {r[1]:,}" for r in reasons)
        where = table["file"].iloc[0] if len(table) == 1 else printable(path)
        raise InputError(
            f"{LOADER}: none of the {read:,} record(s) in {where} is a Service Bus "
            f"message send ({seen}), so there is nothing to replay; expected "
            f"{record_format.expected}; see {GUIDE}"
        )
