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

from dedup_lib.columns import (
    CORRUPT,
    FILE_ID,
    NOT_SEND,
    TALLY_FILE,
    TALLY_WHY,
    column,
    spark_xxhash64,
)
from dedup_lib.errors import DedupLibError, InputError, excerpt, printable
from dedup_lib.telemetry.files import file_key, local_file_ids, spark_long
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.loaded import KINDS
from dedup_lib.telemetry.quarantine import REASON, categories, category
from dedup_lib.telemetry.schema import GUIDE, LOADER, mapping_hint
from dedup_lib.telemetry.sources import reading

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame

    from dedup_lib.telemetry.files import InputFiles
    from dedup_lib.telemetry.formats import RecordFormat


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
        if f.name not in (SOURCE_FILE, FILE_ID)
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
    frame: DataFrame,
    fmt: str,
    expected: str | None = None,
    skipped: Column | None = None,
) -> Tally:
    """Records per file: read, valid, quarantined and skipped, in one Spark job (a plain
    format's rows counted once each, by file and fate; a structured format's records read
    counted apart from what each one becomes); an error when a file's valid, quarantined and
    skipped records do not add up to its records read, or its quarantined ones to their
    reasons."""
    with reading(files, fmt, LOADER, expected):
        found = (
            _per_file(frame, fmt, files) if skipped is None else _records_counted(frame, skipped)
        )
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


def _per_file(frame: DataFrame, fmt: str, files: InputFiles) -> _Found:
    """A plain format's records per file: read, valid, quarantined, and quarantined per reason
    category, in one pass over the files. Giving reasons is a projection of the rows read (nothing
    filtered, nothing joined), so each row read is counted once, under its file and its fate
    (:func:`_fate`) packed in one number: a file's rows read are the sum of its fates.
    Files are told apart by their :func:`file_id` where this machine lists them apart by it,
    else by a hash of their path (grouping by the path's text took as long as the scan itself,
    by its hash a fifth of it; the fates as counts of their own, a seventh; bench_load.py)."""
    reasons = categories(fmt)
    ids = local_file_ids(files) if FILE_ID in frame.columns else None
    file = column(FILE_ID) if ids is not None else F.xxhash64(column(SOURCE_FILE))
    shifted = F.shiftleft(file, _FATE_BITS)
    rows = (
        frame.groupBy(shifted.bitwiseOR(_fate(reasons)).alias(TALLY_FILE))
        .agg(F.count(F.lit(1)), F.max(_every_value(frame)))  # the hash, so every value is read
        .collect()
    )
    per_file: dict[int, tuple[dict[str, int], dict[tuple[str, str], int]]] = {}
    for number, count, _ in rows:
        fate = int(number) & _UNKNOWN
        counts, why = per_file.setdefault(
            int(number) - fate, ({"read": 0, "valid": 0, "quarantined": 0}, {})
        )
        counts["read"] += int(count)
        counts["valid" if fate == 0 else "quarantined"] += int(count)
        if 0 < fate <= len(reasons):
            why["quarantined", reasons[fate - 1]] = int(count)
    known = ids if ids is not None else _hashed(frame)
    names = _file_names(frame, set(per_file), shifted, {_shifted(k): f for k, f in known.items()})
    return [(names[number], counts, why) for number, (counts, why) in per_file.items()]


#: The low bits of :func:`_per_file`'s numbers that hold a row's :func:`_fate`.
_FATE_BITS = 3
#: The fate of a row quarantined for a reason of no known category (then the reasons do not
#: add up to the quarantined rows, and :func:`check_adds_up` says so).
_UNKNOWN = (1 << _FATE_BITS) - 1


def _fate(reasons: tuple[str, ...]) -> Column:
    """0 for a valid row; for a quarantined one, 1 + its reason's place in ``reasons``."""
    if len(reasons) >= _UNKNOWN:
        raise ValueError(
            f"{len(reasons)} reason categories do not fit in {_FATE_BITS} bits beside the "
            "valid and unknown fates: widen _FATE_BITS"
        )
    why = category(column(REASON))
    fate = F.when(column(REASON).isNull(), F.lit(0))
    for place, reason in enumerate(reasons, start=1):
        fate = fate.when(why == reason, F.lit(place))
    return fate.otherwise(F.lit(_UNKNOWN)).cast("long")


def _shifted(number: int) -> int:
    """``number`` shifted as Spark's ``shiftleft`` shifts a long, by :data:`_FATE_BITS`."""
    return spark_long(number << _FATE_BITS)


#: ``file:///x`` as ``DataFrame.inputFiles`` spells a local file, ``file:/x`` as Spark's rows do.
_LOCAL_URL = re.compile(r"^file:///")


def _hashed(frame: DataFrame) -> dict[int, str]:
    """The frame's own list of files by their paths' hashes, hashed here as Spark hashes, in
    each spelling Spark's rows may give them."""
    listed = frame.inputFiles()
    spelled = {s for f in listed for s in (f, _LOCAL_URL.sub("file:/", f))}
    return {spark_xxhash64(s): s for s in spelled}


def _file_names(
    frame: DataFrame, keys: set[int], key: Column, known: dict[int, str]
) -> dict[int, str]:
    """The file of each number :func:`_per_file` grouped by ``key``: from ``known``, else
    looked up in the rows (a file changed since it was listed, a spelling not foreseen)."""
    names = {k: known[k] for k in keys if k in known}
    missing = sorted(keys - names.keys())
    if missing:
        seen = frame.where(key.isin(missing)).select(key.alias(TALLY_FILE), SOURCE_FILE)
        names |= {int(h): p for h, p in seen.dropDuplicates([TALLY_FILE]).collect()}
    return names


def _records_counted(frame: DataFrame, skipped: Column) -> _Found:
    """A structured format's records per file, kind and reason category: read, skipped,
    valid and quarantined, and the sends with and without a MessageId."""
    found: _Found = []
    for file, kind, reason, count in _counts(frame, skipped).collect():
        reasons = {(kind, reason): int(count)} if kind in ("quarantined", "skipped") else {}
        found.append((file, {kind: int(count)}, reasons))
    return found


def _counts(frame: DataFrame, skipped: Column) -> DataFrame:
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
        frame.select(column(SOURCE_FILE), F.lit("read"), nothing),
        frame.select(column(SOURCE_FILE), every.alias("kind"), why.alias(TALLY_WHY)).select(
            column(SOURCE_FILE),
            "kind",
            F.when(F.col("kind").isin("quarantined", "skipped"), F.col(TALLY_WHY)),
        ),
    ]
    return (
        union([p.toDF(SOURCE_FILE, "kind", REASON) for p in parts])
        .groupBy(SOURCE_FILE, "kind", REASON)
        .count()
    )


def refuse_files_without_message_id(
    sends: dict[str, tuple[int, int]], record_format: RecordFormat, key: str
) -> None:
    """Refuse the input at the first file that has sends but no MessageId on any of them
    (an :class:`~dedup_lib.errors.InputError`)."""
    for name, (count, identified) in sends.items():
        if count and not identified:
            raise InputError(
                f"{LOADER}: {name} has {count:,} {record_format.name} send(s) but none "
                f"carries a MessageId under {key!r}; if yours are under another key, pass "
                f"{mapping_hint({'<your key>': 'message_id'})}; {GUIDE} says how to add it "
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
