"""Source columns onto the canonical names: the user's mapping, then the names the Azure SDKs
use (:data:`BUILTIN_ALIASES`), with nested fields read by path; and the canonical columns'
types checked, so a column the parsers cannot read is an error that names it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from dedup_lib.columns import CORRUPT, FILE_ID, NOT_SEND, column
from dedup_lib.errors import InputError, excerpt, printable
from dedup_lib.telemetry.files import file_id
from dedup_lib.telemetry.formats import SOURCE_FILE
from dedup_lib.telemetry.quarantine import EXCERPT, REASON
from dedup_lib.telemetry.schema import (
    BUILTIN_ALIASES,
    CANONICAL_COLUMNS,
    GUIDE,
    LOADER,
    REQUIRED_COLUMNS,
    TEXT_COLUMNS,
    TIME_COLUMNS,
    mapping_hint,
)
from dedup_lib.telemetry.sources import Source

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame

    from dedup_lib.telemetry.files import InputFiles
    from dedup_lib.telemetry.formats import RecordFormat


def _norm(name: str) -> str:
    return name.strip().lstrip("\ufeff").replace("_", "").lower()


def listed(columns: list[str], most: int = 20) -> str:
    shown = ", ".join(printable(c[:EXCERPT]) for c in columns[:most]) or "none"
    return shown + (f" and {len(columns) - most} more" if len(columns) > most else "")


def _aliases(canonical: str) -> set[str]:
    return {_norm(canonical), *(_norm(a) for a in BUILTIN_ALIASES[canonical])}


def _accepted_names(canonical: str) -> str:
    return ", ".join((canonical, *BUILTIN_ALIASES[canonical]))


def _resolve_mapping(columns: list[str], mapping: Mapping[str, str], path: str) -> dict[str, str]:
    """The output name of every source column, in file order: the user's mapping (of columns
    these ones have) first, then for each canonical name the one column that matches it or
    one of its built-in aliases."""
    found = listed(columns)
    by_target: dict[str, list[str]] = {}
    for source, target in mapping.items():
        by_target.setdefault(target, []).append(source)
    for canonical in CANONICAL_COLUMNS:
        if canonical not in by_target:
            matches = [c for c in columns if c not in mapping and _norm(c) in _aliases(canonical)]
            if matches:
                by_target[canonical] = matches
    for target, sources in by_target.items():
        if len(sources) > 1:
            named = " and ".join(repr(s) for s in sources)
            raise InputError(
                f"{LOADER}: in {path}, columns {named} would all become {target}; "
                f"pass {mapping_hint({sources[0]: target})} to choose one"
            )
    renames = {sources[0]: target for target, sources in by_target.items()}
    names = {c: renames.get(c, c) for c in columns}

    seen: dict[str, str] = {}
    for source, target in names.items():
        other = seen.setdefault(target.lower(), source)
        if other != source:
            holder, renamed = (source, other) if names[other] != other else (other, source)
            both = mapping_hint({renamed: target, holder: holder + "_original"})
            raise InputError(
                f"{LOADER}: in {path}, column {renamed!r} would be renamed to "
                f"{target!r}, which is taken by column {holder!r}; map {holder!r} to another name "
                f"as well, for example {both}"
            )
    for reserved in (REASON, SOURCE_FILE):
        if reserved in seen:
            raise InputError(
                f"{LOADER}: {path} has a column {seen[reserved]!r}, a name the quarantine "
                f"adds; rename it, for example "
                f"{mapping_hint({seen[reserved]: reserved + '_original'})}"
            )
    for canonical in REQUIRED_COLUMNS:
        if canonical not in seen:
            raise InputError(
                f"{LOADER}: {path} has no {canonical} column; columns found: {found}"
                f"{_separator_hint(columns)}. Accepted names (case and '_' ignored): "
                f"{_accepted_names(canonical)}; or pass "
                f"{mapping_hint({'<your column>': canonical})}"
                + (f"; {GUIDE} says how to record it" if canonical == "message_id" else "")
            )
    return names


#: What a CSV's header holds when its fields are separated otherwise than by commas.
_SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "'|'"}


def _separator_hint(columns: list[str]) -> str:
    """Why a header read as one column, where it holds another separator (Excel writes ';'
    where the decimal mark is a comma): CSV is read separated by commas."""
    if len(columns) != 1:
        return ""
    for separator, name in _SEPARATORS.items():
        if separator in columns[0]:
            return (
                f" (one column, holding {name}: the file looks separated by {name}, and CSV is "
                "read separated by commas; save it with commas)"
            )
    return ""


def check_types(fields: dict[str, T.DataType], names: dict[str, str], path: str) -> None:
    """Canonical columns must hold something the parsers understand."""
    text: tuple[type[T.DataType], ...] = (T.StringType, T.NumericType, T.NullType)
    for source, target in names.items():
        if target in TEXT_COLUMNS:
            kinds, expected = text, "text or a number"
        elif target in TIME_COLUMNS:
            kinds = (*text, T.TimestampType, T.TimestampNTZType)
            expected = "a timestamp, an epoch number or text"
        else:
            continue
        if not isinstance(fields[source], kinds):
            raise InputError(
                f"{LOADER}: in {path}, column {source!r} ({target}) is "
                f"{fields[source].simpleString()}; expected {expected}"
            )


@dataclass(frozen=True)
class Renamed:
    """One source with its columns renamed: canonical names, ``CORRUPT``, ``SOURCE_FILE``."""

    frame: DataFrame
    fields: dict[str, T.DataType]
    names: dict[str, str]


def _renamed(source: Source, mapping: Mapping[str, str], where: str, file_ids: bool) -> Renamed:
    schema = source.schema
    columns = [c for c in schema.names if c != CORRUPT]
    names = _resolve_mapping(columns, {s: t for s, t in mapping.items() if s in columns}, where)
    source_fields = {f.name: f.dataType for f in schema.fields}
    check_types(source_fields, names, where)
    metadata = source.frame.metadataColumn("_metadata")
    frame = source.frame.select(
        *(column(s).alias(t) for s, t in names.items()),
        *([column(CORRUPT)] if CORRUPT in schema.names else []),
        metadata.getField("file_path").alias(SOURCE_FILE),
        *([file_id(metadata).alias(FILE_ID)] if file_ids else []),
    )
    return Renamed(
        frame=frame,
        fields={t: source_fields[s] for s, t in names.items()},
        names=names,
    )


def _nested(schema: T.StructType, path: str) -> Column | None:
    """The value at ``path`` (``properties.MessageId``: a field of a struct column, or a key of
    a map column, at any depth), or None when ``path`` names nothing in ``schema``. Names may
    hold dots themselves (``customDimensions.servicebus.message.id``): the longest name that
    exists is taken at each level, and a map's key is the rest of the path."""
    parts = path.split(".")
    value: Column | None = None
    dtype: T.DataType = schema
    while parts:
        if isinstance(dtype, T.MapType) and value is not None:
            if not isinstance(dtype.keyType, T.StringType):
                return None
            return value.getItem(".".join(parts))
        if not isinstance(dtype, T.StructType):
            return None
        names = {f.name: f.dataType for f in dtype.fields}
        taken = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in names), 0)
        if not taken or (value is None and taken == len(parts)):
            return None
        name = ".".join(parts[:taken])
        value = column(name) if value is None else value.getField(name)
        dtype, parts = names[name], parts[taken:]
    return value


def _with_nested(source: Source, mapping: Mapping[str, str]) -> Source:
    """``source`` with a column for each mapping key that is a nested path, not a column:
    ``{"customDimensions.MessageId": "message_id"}`` reads that field of every row."""
    schema = source.schema
    added = {
        path: value
        for path in mapping
        if path not in schema.names and (value := _nested(schema, path)) is not None
    }
    if not added:
        return source
    frame = source.frame.select("*", *(v.alias(p) for p, v in added.items()))
    return Source(frame, source.files)


def record_keys(record_format: RecordFormat, mapping: Mapping[str, str]) -> dict[str, str]:
    """The source key of every column a structured format reads: its defaults, then the
    user's mapping (source key -> column), which may also add columns of its own."""
    by_target: dict[str, list[str]] = {}
    for source, target in mapping.items():
        by_target.setdefault(target, []).append(source)
    for target, sources in by_target.items():
        if len(sources) > 1:
            named = " and ".join(repr(s) for s in sources)
            raise InputError(f"{LOADER}: mapping reads {target} from {named}; pass one of them")
        if target in (REASON, SOURCE_FILE, NOT_SEND, CORRUPT, FILE_ID):
            raise InputError(
                f"{LOADER}: mapping names column {target!r}, which the loader adds; "
                f"choose another name for {sources[0]!r}"
            )
    return {**record_format.defaults, **{t: s[0] for t, s in by_target.items()}}


def renamed_sources(
    sources: list[Source],
    mapping: Mapping[str, str],
    files: InputFiles,
    path: str,
    *,
    file_ids: bool = False,
) -> list[Renamed]:
    """Each source read with the mapping's nested paths as columns, then renamed (with
    ``file_ids``, :data:`FILE_ID` too); an error when the mapping names a column that no
    source has."""
    read = [_with_nested(s, mapping) for s in sources]
    every = list(dict.fromkeys(c for s in read for c in s.schema.names if c != CORRUPT))
    for source_name in mapping:
        if source_name not in every:
            raise InputError(
                f"{LOADER}: mapping names column {excerpt(source_name)}, which "
                f"{printable(path)} does not have; columns found: {listed(every)}"
            )
    return [
        _renamed(
            s,
            mapping,
            files.name(s.files[0]) if len(s.files) == 1 else printable(path),
            file_ids,
        )
        for s in read
    ]
