"""A corpus of bad, odd and hostile telemetry files, and what loading each must give.

Each case writes its files under a fresh folder and says what :func:`load_telemetry` must
answer: the rows read, valid and quarantined (and why), or one error that names the file and
matches a pattern. The corpus test runs every case through the API and the error cases
through the command line too.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

HEADER = "message_id,send_time\n"
T0 = 1_700_000_000  # 2023-11-14T22:13:20Z


@dataclass(frozen=True)
class Case:
    """One input and the answer it must get."""

    name: str
    build: Callable[[Path], Path]
    counts: tuple[int, int, int] | None = None  # read, valid, quarantined
    reasons: dict[str, int] = field(default_factory=dict)  # reason category: rows
    ignored: int = 0  # hidden and bookkeeping entries of a folder, not read
    error: str | None = None  # a regex the one-line error matches
    names: str | None = None  # what the error must name (a file, a column)
    mapping: dict[str, str] | None = None
    check: Callable[[object], None] | None = None  # more checks on the LoadedTelemetry
    not_sends: int = 0  # records of a structured format skipped as not sends


def rows(*ids: str, start: int = 0) -> str:
    return "".join(f"{m},{T0 + start + i}\n" for i, m in enumerate(ids))


def text(path: Path, content: str | bytes, *, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def parquet(path: Path, n: int = 100, **columns: pa.Array) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "message_id": [f"m{i}" for i in range(n)],
            "send_time": pa.array([(T0 + i) * 10**6 for i in range(n)], pa.timestamp("us", "UTC")),
            **columns,
        }
    )
    pq.write_table(table, path, compression="snappy")
    return path


def damaged_pages(path: Path) -> Path:
    """A Parquet file whose footer is intact and whose first data page header is not."""
    parquet(path, 5000)
    data = bytearray(path.read_bytes())
    noise = random.Random(1)
    data[4:40] = bytes(noise.randrange(256) for _ in range(36))
    path.write_bytes(bytes(data))
    return path


def truncated_gzip(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    whole = gzip.compress(content.encode())
    path.write_bytes(whole[: len(whole) // 2])
    return path


def folder(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        text(root / name, content)
    return root


def _span(span_id: str, start: str, **attributes: str) -> str:
    values = ",".join(
        f'{{"key":"{k}","value":{{"stringValue":"{v}"}}}}' for k, v in attributes.items()
    )
    return (
        f'{{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"{span_id}",'
        f'"name":"ServiceBus.message","kind":4,"startTimeUnixNano":"{start}",'
        f'"endTimeUnixNano":"{start}","attributes":[{values}]}}'
    )


def otlp(*spans: str) -> str:
    """One OTLP TracesData line holding ``spans``."""
    return f'{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{",".join(spans)}]}}]}}]}}\n'


SB = {"messaging.system": "servicebus"}


def _many_rows(n: int) -> str:
    return HEADER + rows(*(f"m{i}" for i in range(n)))


def _check_body(loaded: object) -> None:
    valid = loaded.valid  # type: ignore[attr-defined]
    bodies = {r["message_id"]: r["body"] for r in valid.select("message_id", "body").collect()}
    assert bodies == {"a": "line one\nline two, with a comma", "b": "plain"}


def _check_reordered(loaded: object) -> None:
    valid = loaded.valid  # type: ignore[attr-defined]
    got = {r[0]: r[1] for r in valid.selectExpr("message_id", "unix_seconds(send_time)").collect()}
    assert got == {"a": T0, "b": T0 + 1, "c": T0 + 2, "d": T0 + 3}


#: Epoch nanoseconds with digits below the microsecond, which Spark cannot hold.
NANOS = [T0 * 10**9 + 123_456_789, (T0 + 1) * 10**9 + 999]


def _check_nanos(loaded: object) -> None:
    """Send times rounded to the microsecond (as epoch nanoseconds in CSV or JSON are), said
    once; the other time column as its epoch nanoseconds, exactly."""
    valid = loaded.valid  # type: ignore[attr-defined]
    rows = valid.selectExpr("message_id", "unix_micros(send_time)", "created").collect()
    got = {r[0]: (r[1], r[2]) for r in rows}
    assert got == {"a": (1_700_000_000_123_457, NANOS[0]), "b": (1_700_000_001_000_001, NANOS[1])}
    (note,) = loaded.notes  # type: ignore[attr-defined]
    assert "nanosecond timestamps" in note
    assert "rounded to the microsecond" in note


def _check_scheduled_never(loaded: object) -> None:
    valid = loaded.valid  # type: ignore[attr-defined]
    got = {r[0]: r[1] for r in valid.select("message_id", "scheduled_enqueue_time").collect()}
    assert got["a"] is None
    assert got["b"] is not None


def _check_hidden_columns(loaded: object) -> None:
    valid = loaded.valid  # type: ignore[attr-defined]
    row = valid.select("_metadata", "_corrupt_record").first()
    assert (row[0], row[1]) == ("meta", "corrupt")
    assert list(loaded.files["file"].str.rsplit("/").str[-1]) == ["hidden.csv"]  # type: ignore[attr-defined]


def _check_partition(loaded: object) -> None:
    valid = loaded.valid  # type: ignore[attr-defined]
    assert "day" in valid.columns


def _check_nested(loaded: object) -> None:
    valid = loaded.valid  # type: ignore[attr-defined]
    got = {r[0]: (r[1], r[2]) for r in valid.select("message_id", "session_id", "entity").collect()}
    assert got == {"a": ("s", "orders"), "b": (None, None)}


def _symlinked(root: Path) -> Path:
    target = text(root / "real" / "sends.csv", HEADER + rows("a", "b"))
    (root / "link.csv").symlink_to(target)
    return root / "link.csv"


def _never_epochs() -> str:
    values = [
        "253402300799",  # DateTime.MaxValue, seconds
        "253402300799999",  # milliseconds
        "253402300799999999",  # microseconds
        "253402300799999999900",  # nanoseconds
        "-62135596800",  # DateTime.MinValue, seconds
        "0",
        "9223372036854775807",  # Int64.MaxValue
        "9999-12-31T23:59:59.9999999Z",
        "0001-01-01T00:00:00Z",
    ]
    return HEADER + "".join(f"n{i},{v}\n" for i, v in enumerate(values)) + rows("ok")


NEVER = "send_time is a 'never' sentinel"
UNPARSEABLE = "unparseable send_time"
MALFORMED = "malformed CSV line"

CASES: list[Case] = [
    # Paths are literal, folders recursive, bookkeeping ignored and listed.
    Case(
        "brackets-in-name",
        lambda d: (
            folder(d, {"day[1].csv": HEADER + rows("a"), "day1.csv": HEADER + rows("x", "y")})
            / "day[1].csv"
        ),
        counts=(1, 1, 0),
    ),
    Case(
        "star-in-name",
        lambda d: (
            folder(d, {"a*.csv": HEADER + rows("a"), "ab.csv": HEADER + rows("x", "y")}) / "a*.csv"
        ),
        counts=(1, 1, 0),
    ),
    Case(
        "question-mark-in-name",
        lambda d: (
            folder(d, {"a?.csv": HEADER + rows("a"), "ab.csv": HEADER + rows("x")}) / "a?.csv"
        ),
        counts=(1, 1, 0),
    ),
    Case(
        "braces-in-name",
        lambda d: (
            folder(d, {"{a,b}.csv": HEADER + rows("a"), "a.csv": HEADER + rows("x")}) / "{a,b}.csv"
        ),
        counts=(1, 1, 0),
    ),
    Case(
        "backslash-space-percent-unicode-names",
        lambda d: folder(
            d / "in",
            {
                "back\\slash.csv": HEADER + rows("a"),
                "with space.csv": HEADER + rows("b"),
                "pc%41.csv": HEADER + rows("c"),
                "müller - ü.csv": HEADER + rows("d"),
            },
        ),
        counts=(4, 4, 0),
    ),
    Case(
        "brackets-in-folder-name",
        lambda d: folder(d / "run[2]", {"a.csv": HEADER + rows("a", "b")}),
        counts=(2, 2, 0),
    ),
    Case(
        "subfolders-read-recursively",
        lambda d: folder(
            d / "in",
            {
                "x.csv": HEADER + rows("a"),
                "sub/y.csv": HEADER + rows("b"),
                "sub/deeper/z.csv": HEADER + rows("c", "d"),
            },
        ),
        counts=(4, 4, 0),
    ),
    Case(
        "bookkeeping-ignored-and-listed",
        lambda d: folder(
            d / "in",
            {
                "part-0.csv": HEADER + rows("a", "b"),
                "_SUCCESS": "",
                ".part-0.csv.crc": b"\x00\x01crc",
                "_temporary/0/part-1.csv": HEADER + rows("half-written"),
                ".hidden/old.csv": HEADER + rows("old"),
                "_committed_123": "x",
                "part-2.csv._COPYING_": HEADER + rows("copying"),
            },
        ),
        counts=(2, 2, 0),
        ignored=6,
    ),
    Case(
        "partitioned-folders-become-columns",
        lambda d: folder(
            d / "in",
            {
                "day=2024-01-01/a.csv": HEADER + rows("a"),
                "day=2024-01-02/b.csv": HEADER + rows("b"),
            },
        ),
        counts=(2, 2, 0),
        check=_check_partition,
    ),
    Case(
        "partition-folders-beside-plain-files-lose-nothing",
        lambda d: folder(
            d / "in", {"root.csv": HEADER + rows("a"), "day=2024-01-01/b.csv": HEADER + rows("b")}
        ),
        counts=(2, 2, 0),
    ),
    Case("symlink-to-a-file", _symlinked, counts=(2, 2, 0)),
    Case(
        "only-bookkeeping",
        lambda d: folder(d / "in", {"_SUCCESS": "", ".a.crc": "x"}),
        error=r"no data files in .*\(2 hidden or bookkeeping entries ignored\)",
        names="in",
    ),
    Case(
        "empty-folder",
        lambda d: (d / "in").mkdir() or d / "in",
        error="no data files in",
        names="in",
    ),
    Case("missing-path", lambda d: d / "nowhere.csv", error="does not exist", names="nowhere.csv"),
    Case(
        "colon-in-name",
        lambda d: text(d / "10:00.csv", HEADER + rows("a")),
        error="Hadoop cannot read file names with ':'",
        names="10:00.csv",
    ),
    Case(
        "unknown-extension",
        lambda d: text(d / "sends.xlsx", "PK\x03\x04"),
        error=r"cannot tell the format.*\(--format parquet, csv or json on the command line\)$",
        names="sends.xlsx",
    ),
    Case(
        "mixed-formats",
        lambda d: folder(d / "in", {"a.csv": HEADER, "b.jsonl": "{}\n"}),
        error="mixes formats",
        names="a.csv",
    ),
    # Damaged files: found when the data is read, named.
    Case(
        "parquet-damaged-pages",
        lambda d: damaged_pages(d / "sends.parquet"),
        error="cannot read .* as parquet: .*damaged",
        names="sends.parquet",
    ),
    Case(
        "parquet-damaged-pages-among-good",
        lambda d: (
            (
                parquet(d / "in" / "a.parquet"),
                damaged_pages(d / "in" / "sub" / "b.parquet"),
                parquet(d / "in" / "c.parquet"),
            )
            and d / "in"
        ),
        error="cannot read sub/b.parquet as parquet",
        names="sub/b.parquet",
    ),
    Case(
        "parquet-footer-cut",
        lambda d: text(d / "cut.parquet", parquet(d / "whole.parquet").read_bytes()[:-40]),
        error="cannot read .* as parquet",
        names="cut.parquet",
    ),
    Case(
        "text-named-parquet",
        lambda d: text(d / "text.parquet", HEADER * 20),
        error="cannot read .* as parquet",
        names="text.parquet",
    ),
    Case(
        "empty-parquet-file",
        lambda d: text(d / "zero.parquet", b""),
        error="cannot read .* as parquet",
        names="zero.parquet",
    ),
    # A file Spark wrote, written again by pyarrow in nanoseconds under Spark's own schema:
    # refused as its rows are read, the column named and how to write it.
    Case(
        "parquet-nanoseconds-under-spark-s-schema",
        lambda d: _nanos_under_spark_schema(d / "sliced.parquet"),
        error="its column send_time holds nanosecond timestamps, .*coerce_timestamps='us'",
        names="sliced.parquet",
    ),
    Case(
        "truncated-gzip-csv",
        lambda d: truncated_gzip(d / "sends.csv.gz", _many_rows(5000)),
        error="cut short",
        names="sends.csv.gz",
    ),
    Case(
        "gzip-that-is-not",
        lambda d: text(d / "sends.csv.gz", HEADER + rows("a")),
        error="not gzip-compressed",
        names="sends.csv.gz",
    ),
    Case(
        "truncated-gzip-jsonl",
        lambda d: truncated_gzip(
            d / "sends.jsonl.gz",
            "".join(f'{{"message_id":"m{i}","send_time":{T0 + i}}}\n' for i in range(5000)),
        ),
        error="cut short",
        names="sends.jsonl.gz",
    ),
    Case(
        "truncated-gzip-among-good-csv",
        lambda d: (
            (
                folder(d / "in", {"a.csv": HEADER + rows("a"), "b.csv": HEADER + rows("b")}),
                truncated_gzip(d / "in" / "late" / "c.csv.gz", _many_rows(5000)),
            )
            and d / "in"
        ),
        error="cannot read late/c.csv.gz as csv: it is cut short",
        names="late/c.csv.gz",
    ),
    # CSV records: malformed ones quarantined, fields never cut, headers aligned by name.
    Case(
        "malformed-record-among-good",
        lambda d: text(d / "s.csv", HEADER + rows("a") + "b,1700000001,extra,fields\n" + rows("c")),
        counts=(3, 2, 1),
        reasons={MALFORMED: 1},
    ),
    Case(
        "unclosed-quote-at-end",
        lambda d: text(d / "s.csv", HEADER + rows("a", "b") + 'c,"1700000003\nd,1700000004\n'),
        counts=(3, 2, 1),
        reasons={UNPARSEABLE: 1},
    ),
    Case(
        "quoted-newline-in-field",
        lambda d: text(
            d / "s.csv",
            "message_id,send_time,body\n"
            f'a,{T0},"line one\nline two, with a comma"\nb,{T0 + 1},plain\n',
        ),
        counts=(2, 2, 0),
        check=_check_body,
    ),
    Case(
        "crlf-line-endings",
        lambda d: text(d / "s.csv", (HEADER + rows("a", "b")).replace("\n", "\r\n")),
        counts=(2, 2, 0),
    ),
    Case(
        "byte-order-mark-csv",
        lambda d: text(d / "s.csv", "\ufeff" + HEADER + rows("a")),
        counts=(1, 1, 0),
    ),
    Case(
        "byte-order-mark-jsonl",
        lambda d: text(d / "s.jsonl", f'\ufeff{{"message_id":"a","send_time":{T0}}}\n'),
        counts=(1, 1, 0),
    ),
    Case(
        "columns-in-different-orders",
        lambda d: folder(
            d / "in",
            {
                "a.csv": f"message_id,send_time\na,{T0}\nb,{T0 + 1}\n",
                "b.csv": f"send_time,message_id\n{T0 + 2},c\n",
                "sub/c.csv": f"send_time,note,message_id\n{T0 + 3},x,d\n",
            },
        ),
        counts=(4, 4, 0),
        check=_check_reordered,
    ),
    Case(
        "three-tools-three-namings",
        lambda d: folder(
            d / "in",
            {
                "sdk.csv": f"MessageId,EnqueuedTimeUtc\na,{T0}\n",
                "ours.csv": f"message_id,send_time\nb,{T0 + 1}\n",
                "other.csv.gz": gzip.compress(f"SendTime,MessageId,Extra\n{T0 + 2},c,x\n".encode()),
            },
        ),
        counts=(3, 3, 0),
    ),
    Case("header-only", lambda d: text(d / "s.csv", HEADER), counts=(0, 0, 0)),
    Case(
        "empty-file-among-good",
        lambda d: folder(d / "in", {"a.csv": HEADER + rows("a", "b"), "empty.csv": ""}),
        counts=(2, 2, 0),
    ),
    Case(
        "empty-file-alone",
        lambda d: text(d / "empty.csv", ""),
        error="has no message_id column",
        names="empty.csv",
    ),
    Case(
        "columns-named-like-spark-hidden-ones",
        lambda d: text(
            d / "hidden.csv",
            f"message_id,send_time,_metadata,_corrupt_record\na,{T0},meta,corrupt\n",
        ),
        counts=(1, 1, 0),
        check=_check_hidden_columns,
    ),
    Case(
        "binary-header",
        lambda d: text(d / "bin.csv", b"\x1b[2J\x00\xff\xfe,\x07\x1b]0;pwned\x07\n1,2\n"),
        error="has no message_id column",
        names="bin.csv",
    ),
    Case(
        "semicolon-separated",
        lambda d: text(d / "s.csv", "message_id;send_time\na;1700000000\n"),
        error="no message_id column; columns found: message_id;send_time.* separated by semicolons",
        names="s.csv",
    ),
    Case(
        "tab-separated",
        lambda d: text(d / "t.csv", "message_id\tsend_time\na\t1700000000\n"),
        error="no message_id column;.* separated by tabs, and CSV is read separated by commas",
        names="t.csv",
    ),
    Case(
        "nul-bytes-in-a-field",
        lambda d: text(d / "s.csv", f"message_id,send_time,body\na,{T0},x\x00y\n"),
        counts=(1, 1, 0),
    ),
    Case(
        "megabyte-send-time",
        lambda d: text(d / "s.csv", HEADER + rows("a") + "b," + "9" * 1_000_000 + "x\n"),
        counts=(2, 1, 1),
        reasons={UNPARSEABLE: 1},
    ),
    Case(
        "many-columns",
        lambda d: text(
            d / "s.csv",
            "message_id,send_time," + ",".join(f"c{i}" for i in range(2000)) + "\n"
            f"a,{T0}," + ",".join("v" for _ in range(2000)) + "\n",
        ),
        counts=(1, 1, 0),
    ),
    # JSON Lines.
    Case(
        "malformed-json-line",
        lambda d: text(
            d / "s.jsonl",
            f'{{"message_id":"a","send_time":{T0}}}\n{{"message_id": "b", oops\n'
            f'{{"message_id":"c","send_time":{T0 + 2}}}\n',
        ),
        counts=(3, 2, 1),
        reasons={"malformed JSON line": 1},
    ),
    Case(
        "json-line-that-is-a-number",
        lambda d: text(d / "s.jsonl", f'{{"message_id":"a","send_time":{T0}}}\n5\n'),
        counts=(2, 1, 1),
    ),
    Case(
        "json-nested-deep",
        lambda d: text(
            d / "s.jsonl",
            f'{{"message_id":"a","send_time":{T0}}}\n'
            + '{"message_id":"b","x":'
            + "[" * 5000
            + "]" * 5000
            + "}\n",
        ),
        counts=(2, 1, 1),
    ),
    Case(
        "no-json-object",
        lambda d: text(d / "s.jsonl", "just text\nmore text\n"),
        error="no line of .* is a JSON object",
        names="s.jsonl",
    ),
    # Times: "never" sentinels never land in 1978; overflowing numbers are unparseable.
    Case(
        "never-sentinels",
        lambda d: text(d / "s.csv", _never_epochs()),
        counts=(10, 1, 9),
        reasons={NEVER: 9},
    ),
    Case(
        "overflowing-and-not-numbers",
        lambda d: text(
            d / "s.csv",
            HEADER
            + "a,inf\nb,nan\nc,1e400\nd,-1e400\ne,Infinity\n"
            + "f,99999999999999999999999999999999999999999\n"
            + rows("ok"),
        ),
        counts=(7, 1, 6),
        reasons={UNPARSEABLE: 6},
    ),
    Case(
        "every-row-quarantined",
        lambda d: text(d / "s.csv", HEADER + "a,not a time\nb,inf\n"),
        counts=(2, 0, 2),
        reasons={UNPARSEABLE: 2},
    ),
    Case(
        "parquet-double-inf-and-nan",
        lambda d: _parquet_doubles(d / "s.parquet"),
        counts=(4, 1, 3),
        reasons={UNPARSEABLE: 3},
    ),
    Case(
        "parquet-timestamps-at-the-ends",
        lambda d: _parquet_extremes(d / "s.parquet"),
        counts=(3, 1, 2),
        reasons={NEVER: 2},
    ),
    Case(
        "scheduled-never-means-not-scheduled",
        lambda d: text(
            d / "s.csv",
            "message_id,send_time,scheduled_enqueue_time\n"
            f"a,{T0},253402300799999\nb,{T0 + 1},{T0 + 60}\n",
        ),
        counts=(2, 2, 0),
        check=_check_scheduled_never,
    ),
    Case(
        "parquet-map-column",
        lambda d: parquet(
            d / "s.parquet",
            3,
            props=pa.array([[("k", "v")]] * 3, pa.map_(pa.string(), pa.string())),
        ),
        counts=(3, 3, 0),
    ),
    # pandas' to_parquet as it comes: nanosecond timestamps, naive (adjusted to UTC: false)
    # or with a time zone (true); Spark refuses both on its own.
    Case(
        "pandas-parquet-nanosecond-timestamps",
        lambda d: _pandas_nanos(d / "nanos.parquet", utc=False),
        counts=(2, 2, 0),
        check=_check_nanos,
    ),
    Case(
        "pandas-parquet-nanosecond-timestamps-in-utc",
        lambda d: _pandas_nanos(d / "nanos-utc.parquet", utc=True),
        counts=(2, 2, 0),
        check=_check_nanos,
    ),
    # Nested paths in a mapping: a field of a struct (JSON objects), a key of a map (Parquet).
    Case(
        "mapping-nested-json-fields",
        lambda d: text(
            d / "deps.jsonl",
            f'{{"timestamp":{T0},"customDimensions":{{"MessageId":"a","Session":{{"Id":"s"}},'
            f'"servicebus.entity":"orders"}}}}\n'
            f'{{"timestamp":{T0 + 1},"customDimensions":{{"MessageId":"b"}}}}\n',
        ),
        counts=(2, 2, 0),
        mapping={
            "customDimensions.MessageId": "message_id",
            "timestamp": "send_time",
            "customDimensions.Session.Id": "session_id",
            "customDimensions.servicebus.entity": "entity",
        },
        check=_check_nested,
    ),
    Case(
        "mapping-nested-map-keys",
        lambda d: parquet(
            d / "deps.parquet",
            2,
            properties=pa.array(
                [[("MessageId", "x"), ("servicebus.session_id", "s")], [("MessageId", "y")]],
                pa.map_(pa.string(), pa.string()),
            ),
        ),
        counts=(2, 2, 0),
        mapping={
            "properties.MessageId": "message_id",
            "message_id": "original_id",
            "properties.servicebus.session_id": "session_id",
        },
    ),
    Case(
        "mapping-nested-path-that-is-not-there",
        lambda d: text(d / "deps.jsonl", f'{{"timestamp":{T0},"customDimensions":{{"Id":"a"}}}}\n'),
        mapping={"customDimensions.MessageId": "message_id", "timestamp": "send_time"},
        error="mapping names column 'customDimensions.MessageId', which .* does not have",
        names="deps.jsonl",
    ),
    # OpenTelemetry traces (recognised from the content): spans judged like rows.
    Case(
        "otlp-damaged-line-and-bad-time-among-spans",
        lambda d: text(
            d / "traces.json",
            otlp(_span("a1", f"{T0}000000000", **SB, **{"messaging.message.id": "a"}))
            + '{"resourceSpans": [oops\n'
            + otlp(
                _span("a2", "soon", **SB, **{"messaging.message.id": "b"}),
                _span("a3", f"{T0}000000000", **{"http.route": "/x"}),
            ),
        ),
        counts=(4, 1, 2),
        not_sends=1,
        reasons={"malformed otlp line": 1, UNPARSEABLE: 1},
    ),
    Case(
        "otlp-sends-without-message-id",
        lambda d: text(d / "sdk.json", otlp(_span("a1", f"{T0}000000000", **SB))),
        error=r"has 1 otlp send\(s\) but none carries a MessageId under 'messaging\.message\.id'",
        names="sdk.json",
    ),
    Case(
        "otlp-no-service-bus-spans",
        lambda d: text(
            d / "http.json", otlp(_span("a1", f"{T0}000000000", **{"http.method": "GET"}))
        ),
        error=r"none of the 1 record\(s\) in .*http\.json is a Service Bus message send "
        r"\('not a Service Bus span: ServiceBus\.message': 1\), so there is nothing to replay",
        names="http.json",
    ),
    Case(
        "otlp-truncated-gzip",
        lambda d: truncated_gzip(
            d / "traces.json.gz",
            "".join(
                otlp(
                    _span(f"{i:016x}", f"{T0 + i}000000000", **SB, **{"messaging.message.id": "m"})
                )
                for i in range(3000)
            ),
        ),
        error="cannot read .* as otlp: it is cut short",
        names="traces.json.gz",
    ),
    Case(
        "struct-message-id",
        lambda d: _parquet_struct_id(d / "s.parquet"),
        error="column 'message_id' .* is struct",
        names="s.parquet",
    ),
]


def _parquet_doubles(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    values = [float("inf"), float("-inf"), float("nan"), float(T0)]
    pq.write_table(pa.table({"message_id": ["a", "b", "c", "d"], "send_time": values}), path)
    return path


def _parquet_extremes(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    micros = [-62135596800 * 10**6, 253402300799 * 10**6 + 999_999, T0 * 10**6]
    table = pa.table(
        {"message_id": ["a", "b", "c"], "send_time": pa.array(micros, pa.timestamp("us", "UTC"))}
    )
    pq.write_table(table, path)
    return path


def _pandas_nanos(path: Path, utc: bool) -> Path:
    """A file as pandas writes it by default: a send time and another time column in ns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    times = pd.to_datetime(NANOS, unit="ns", utc=utc)
    pd.DataFrame({"message_id": ["a", "b"], "send_time": times, "created": times}).to_parquet(path)
    return path


#: Spark's schema of a message id and a send time, as Spark stores it in a Parquet footer.
_SPARK_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "message_id", "type": "string", "nullable": True, "metadata": {}},
            {"name": "send_time", "type": "timestamp", "nullable": True, "metadata": {}},
        ],
    }
)


def _nanos_under_spark_schema(path: Path) -> Path:
    """Send times in nanoseconds, under the footer's Spark schema that calls them timestamps."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {"message_id": ["a", "b"], "send_time": pa.array(NANOS, pa.timestamp("ns"))},
        metadata={"org.apache.spark.sql.parquet.row.metadata": _SPARK_SCHEMA},
    )
    pq.write_table(table, path)
    return path


def _parquet_struct_id(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = pa.array([{"v": "a"}], pa.struct([("v", pa.string())]))
    table = pa.table({"message_id": ids, "send_time": pa.array([T0], pa.int64())})
    pq.write_table(table, path)
    return path
