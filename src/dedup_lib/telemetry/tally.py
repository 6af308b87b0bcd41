"""Every record a load reads, counted per file and fate (valid, quarantined, skipped) in one
Spark job, and checked to add up: no row is lost without a word. Also the errors only the
counts can tell: a file of sends without any MessageId, files without any send."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
from pyspark.sql import functions as F

from dedup_lib.columns import column, spark_xxhash64
from dedup_lib.errors import DedupLibError, InputError, excerpt, printable
from dedup_lib.telemetry.files import file_key
from dedup_lib.telemetry.formats import NOT_SEND, SOURCE_FILE
from dedup_lib.telemetry.loaded import KINDS
from dedup_lib.telemetry.quarantine import REASON, categories, category
from dedup_lib.telemetry.schema import GUIDE, LOADER
from dedup_lib.telemetry.sources import CORRUPT, reading

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame

    from dedup_lib.telemetry.files import InputFiles
    from dedup_lib.telemetry.formats import RecordFormat

_WHY = "__dedup_why"
_FILE = "__dedup_file"


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
    judged: DataFrame,
    fmt: str,
    expected: str | None = None,
    skipped: Column | None = None,
) -> Tally:
    """Records per file: read, valid, quarantined and skipped (each counted, none inferred
    from the others), in one Spark job; an error when a file's valid, quarantined and skipped
    records do not add up to its records read, or its quarantined ones to their reasons."""
    with reading(files, fmt, LOADER, expected):
        found = _per_file(judged, fmt) if skipped is None else _records_counted(judged, skipped)
    names = (*KINDS, "send", "identified")
    counted: dict[str, dict[str, int]] = {file_key(f): dict.fromkeys(names, 0) for f in files.files}
    by_reason: dict[tuple[str, str], int] = {}
    reasons_of: dict[str, int] = {}
    for file, counts, reasons in found:
        key = file_key(file)
        for kind, count in counts.items():
            counted.setdefault(key, dict.fromkeys(names, 0))[kind] += count
        for (kind, reason), count in reasons.items():
            by_reason[kind, reason] = by_reason.get((kind, reason), 0) + count
            if kind == "quarantined":
                reasons_of[key] = reasons_of.get(key, 0) + count
    table = pd.DataFrame(
        [{"file": files.name(f), **{k: c[k] for k in KINDS}} for f, c in counted.items()],
        columns=["file", *KINDS],
    )
    for key, counts in counted.items():
        check_adds_up(files.name(key), counts, reasons_of.get(key, 0))
    sends = {files.name(f): (c["send"], c["identified"]) for f, c in counted.items()}
    why = pd.DataFrame(
        [{"kind": k, REASON: r, "count": n} for (k, r), n in by_reason.items() if n],
        columns=["kind", REASON, "count"],
    )
    return Tally(table, sends, why)


#: One file's counts by kind, and by (kind, reason category), as :func:`tally` adds them up.
_Found = list[tuple[str, dict[str, int], dict[tuple[str, str], int]]]


def _per_file(judged: DataFrame, fmt: str) -> _Found:
    """A plain format's records per file: read, valid, quarantined, and quarantined per reason
    category, each counted in one pass over the files. Judging is a projection of the rows
    read (nothing filtered, nothing joined), so the rows read and their fates are counted from
    the same rows. Files are told apart by a hash of their path, a number: grouping by the
    path's text took as long as the scan itself (bench_load.py)."""
    why = category(column(REASON))
    reasons = categories(fmt)
    rows = (
        judged.groupBy(F.xxhash64(column(SOURCE_FILE)).alias(_FILE))
        .agg(
            F.count(F.lit(1)),
            F.count_if(column(REASON).isNull()),
            F.count_if(column(REASON).isNotNull()),
            F.max(_every_value(judged)),  # the hash is used, so every value is read
            *(F.count_if(why == c) for c in reasons),
        )
        .collect()
    )
    names = _file_names(judged, {int(row[0]) for row in rows})
    found: _Found = []
    for key, read, valid, quarantined, _, *per_reason in rows:
        counts = {"read": int(read), "valid": int(valid), "quarantined": int(quarantined)}
        why_counted = {("quarantined", r): int(n) for r, n in zip(reasons, per_reason, strict=True)}
        found.append((names[int(key)], counts, why_counted))
    return found


#: ``file:///x`` as ``DataFrame.inputFiles`` spells a local file, ``file:/x`` as Spark's rows do.
_LOCAL_URL = re.compile(r"^file:///")


def _file_names(frame: DataFrame, keys: set[int]) -> dict[int, str]:
    """The path of each file whose hash :func:`_per_file` grouped by, as Spark's rows spell it:
    from the frame's own list of files, hashed here as Spark hashes; a hash that no spelling
    of them gives is looked up in the rows."""
    listed = frame.inputFiles() if keys else []
    spelled = {s for f in listed for s in (f, _LOCAL_URL.sub("file:/", f))}
    names = {h: s for s in spelled if (h := spark_xxhash64(s)) in keys}
    missing = sorted(keys - names.keys())
    if missing:
        hash_of = F.xxhash64(column(SOURCE_FILE))
        seen = frame.where(hash_of.isin(missing)).select(hash_of.alias(_FILE), SOURCE_FILE)
        names |= {int(h): p for h, p in seen.dropDuplicates([_FILE]).collect()}
    return names


def _records_counted(judged: DataFrame, skipped: Column) -> _Found:
    """A structured format's records per file, kind and reason category: read, skipped,
    valid and quarantined, and the sends with and without a MessageId."""
    found: _Found = []
    for file, kind, reason, count in _counts(judged, skipped).collect():
        reasons = {(kind, reason): int(count)} if kind in ("quarantined", "skipped") else {}
        found.append((file, {kind: int(count)}, reasons))
    return found


def _counts(judged: DataFrame, skipped: Column) -> DataFrame:
    """A structured format's records per file, kind and reason category (``read``,
    ``valid``, ``quarantined``, ``skipped``, ``send`` and ``identified``: sends with a
    MessageId), as one plan: the records read counted apart from the kinds each one
    becomes. Its records are built from fully parsed lines (its read counts
    them): hashing every derived value again would cost several times the load and find
    nothing."""
    kind = F.when(column(REASON).isNull(), F.lit("valid")).otherwise(F.lit("quarantined"))
    why = F.when(skipped, category(column(NOT_SEND))).otherwise(
        F.when(column(REASON).isNotNull(), category(column(REASON)))
    )
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
        judged.select(column(SOURCE_FILE), F.lit("read"), nothing),
        judged.select(column(SOURCE_FILE), every.alias("kind"), why.alias(_WHY)).select(
            column(SOURCE_FILE),
            "kind",
            F.when(F.col("kind").isin("quarantined", "skipped"), F.col(_WHY)),
        ),
    ]
    return (
        union([p.toDF(SOURCE_FILE, "kind", REASON) for p in parts])
        .groupBy(SOURCE_FILE, "kind", REASON)
        .count()
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
