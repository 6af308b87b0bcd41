"""What the commands share: errors the user can fix, the one line an error becomes, option
checks that run before Spark starts, progress lines, the Spark session, and small tables
printed as text."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
import time
import traceback
from typing import TYPE_CHECKING

from dedup_lib.errors import DedupLibError, excerpt, printable
from dedup_lib.rules.durations import format_duration
from dedup_lib.spark import (
    get_spark,
    is_connect,
    log_error,
    spark_errors,
    spark_log_path,
    spark_message,
)
from dedup_lib.telemetry.files import has_scheme, is_remote_session, local_path
from dedup_lib.telemetry.schema import FORMATS, RECORD_FORMAT_NAMES
from dedup_lib.text import escape, shown

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    import pandas as pd
    from pyspark.sql import SparkSession

PROG = "dedup-lib"
#: Every format the loader reads and the generator writes: the choices of each ``--format``.
TELEMETRY_FORMATS: tuple[str, ...] = (*FORMATS, *RECORD_FORMAT_NAMES)

#: The most rows ``generate`` is asked for: beyond, a typo (an extra zero or three) would run
#: for days.
MAX_ROWS = 10**12


class CommandError(DedupLibError):
    """A problem with the command line the user can fix: reported as one line, exit status 1."""


def _from_spark(exc: BaseException) -> bool:
    """True when ``exc`` is a Spark error or was raised because of one."""
    errors = spark_errors()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, errors):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def log_details(command: str, exc: BaseException) -> None:
    """Append ``exc``'s traceback to Spark's log, for an error whose one line is not enough."""
    log_error(f"{PROG} {command}: {type(exc).__name__}", "".join(traceback.format_exception(exc)))


def error_line(command: str, exc: BaseException) -> str:
    """The one line an error becomes on stderr, escaped (no control characters from data):
    the library's message as it is; a Spark error's first meaningful line; anything else as
    an internal error, its traceback in the log. Each names the log when Spark was involved."""
    log = spark_log_path()
    if isinstance(exc, DedupLibError):
        text = str(exc)
        if _from_spark(exc):
            text += f" (Spark's log: {log})"
    elif _from_spark(exc):
        log_details(command, exc)
        text = f"{spark_message(exc)} (Spark's log: {log})"
    else:
        log_details(command, exc)
        text = f"internal error: {type(exc).__name__}: {exc} (details: {log})"
    return printable(f"{PROG} {command}: error: {text}")


class Progress:
    """Step lines on stderr, with the seconds each took."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.perf_counter()

    def step(self, text: str) -> None:
        if not self.quiet:
            elapsed = time.perf_counter() - self.started
            print(f"[{elapsed:7.1f}s] {printable(text)}", file=sys.stderr, flush=True)


def connect_progress(
    stages: Iterable[object] | None, inflight_tasks: int, operation_id: str | None, done: bool
) -> None:
    """Spark Connect progress: tasks done out of all known, on one line of stderr."""
    stages = list(stages or ())
    total = sum(int(getattr(s, "num_tasks", 0)) for s in stages)
    finished = sum(int(getattr(s, "num_completed_tasks", 0)) for s in stages)
    end = "\n" if done else ""
    print(f"\r  Spark: {finished}/{total} tasks", end=end, file=sys.stderr, flush=True)


def session(args: argparse.Namespace) -> SparkSession:
    if args.spark is not None:
        session: SparkSession = args.spark
        return session
    quiet = args.quiet
    spark = get_spark(PROG, remote=args.remote, master=args.master)
    if is_connect(spark) and not quiet and sys.stderr.isatty():
        spark.registerProgressHandler(connect_progress)  # type: ignore[arg-type]
    return spark


def print_note(note: str) -> None:
    """One of what a load did that the user should know (``LoadedTelemetry.notes``,
    ``Watch.notes``), as every command prints it."""
    print(f"Note: {note}.")


def column_mapping(pairs: Sequence[str]) -> dict[str, str]:
    mapping = {}
    for pair in pairs:
        source, sep, target = pair.partition("=")
        if not sep or not source or not target:
            raise CommandError(
                f"--map {excerpt(pair)}: expected SOURCE=CANONICAL, e.g. Id=message_id"
            )
        mapping[source] = target
    return mapping


#: The widest value a table in the terminal shows whole; a longer one is cut, saying how long.
CELL = 80


def _shown(value: object) -> object:
    return shown(value, CELL) if isinstance(value, str) else value


def text_table(df: pd.DataFrame) -> str:
    """``df`` as aligned text: shares as percentages, delays as durations, and data (entity
    names, MessageIds) as text (:func:`dedup_lib.text.shown`: escaped, over :data:`CELL`
    characters cut)."""
    import pandas as pd

    table = df.copy()
    table.columns = [escape(str(name), "text") for name in table.columns]
    for name in table.columns:
        if pd.api.types.is_object_dtype(table[name]) or pd.api.types.is_string_dtype(table[name]):
            table[name] = table[name].map(_shown)
        if name.startswith("share"):
            table[name] = table[name].map(lambda v: "-" if pd.isna(v) else f"{v:.1%}")
        elif name.endswith(("delay", "caught_from")):
            table[name] = table[name].map(lambda v: format_duration(v, "up"))
        elif name in ("first", "last"):
            table[name] = table[name].map(lambda t: t.strftime("%Y-%m-%d %H:%M:%S"))
    return table.to_string(index=False)


def iso_time(text: str) -> str:
    """An ISO 8601 time for ``--start``/``--end``, checked and passed on as written."""
    import pandas as pd

    try:
        pd.Timestamp(dt.datetime.fromisoformat(text.strip()))
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-11-03T21:00, got {excerpt(text)}"
        ) from None
    return text.strip()


def time_range(start: str | None, end: str | None) -> None:
    """``--end`` after ``--start``, both read as UTC when they name no offset."""
    if start is None or end is None:
        return
    import pandas as pd

    first, last = (pd.Timestamp(t) for t in (start, end))
    first, last = (t.tz_localize("UTC") if t.tzinfo is None else t for t in (first, last))
    if last <= first:
        raise CommandError(f"--end {end} is not after --start {start}")


def entity_name(text: str) -> str:
    """A queue or topic name for ``--entity``: not empty, printable, at most 260 characters
    (the service's limit)."""
    if not text.strip() or printable(text) != text or len(text) > 260:
        raise argparse.ArgumentTypeError(
            f"expected a queue or topic name (printable, 1 to 260 characters), got {excerpt(text)}"
        )
    return text


def remote_cluster(args: argparse.Namespace) -> bool:
    """True when the command runs on a remote Spark Connect server (``--remote`` or
    ``SPARK_REMOTE`` is ``sc://...``, or the session given is one), which resolves paths."""
    spark = getattr(args, "spark", None)
    if spark is not None:
        return is_remote_session(spark)
    url = getattr(args, "remote", None) or os.environ.get("SPARK_REMOTE") or ""
    return url.startswith("sc://")


def existing_input(path: str, args: argparse.Namespace | None = None) -> None:
    """The input exists, when it is a local path or ``file:`` URI (a URL is Spark's to
    check): the loader's own test (:func:`dedup_lib.telemetry.files.local_path`), before
    Spark starts. On a remote cluster (``args``) a path this machine lacks is the cluster's
    to resolve, and the loader's error says when it does not find it either."""
    local = local_path(path)
    if local is not None and not os.path.exists(local):
        if args is not None and remote_cluster(args):
            return
        raise CommandError(f"{path} does not exist")


def writable_target(option: str, path: str) -> None:
    """``path`` can be written: its nearest existing folder is a folder we may write in (Spark
    creates the missing ones). A URL is Spark's to check."""
    if has_scheme(path):
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise CommandError(f"{option} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CommandError(f"{option} {path}: cannot write in {parent}")


def content_columns(text: str | None) -> list[str] | None:
    """The ``--content`` columns, at least one when the option is given."""
    if text is None:
        return None
    columns = [c.strip() for c in text.split(",") if c.strip()]
    if not columns:
        raise CommandError(f"--content {text!r}: name at least one column, e.g. Body,Subject")
    return columns


def _whole(text: str, least: int) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {excerpt(text)}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected at least {least}, got {value}")
    return value


def seed(text: str) -> int:
    """A random seed for ``--seed``: a whole number, 0 or more."""
    return _whole(text, 0)


def rows(text: str) -> int:
    """How many rows ``generate`` writes: 1 to :data:`MAX_ROWS`."""
    value = positive(text)
    if value > MAX_ROWS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_ROWS:,}, got {value:,}")
    return value


def remote_url(text: str) -> str:
    """A Spark Connect URL for ``--remote``: ``sc://host[:port]`` or ``local[N]``."""
    if not re.fullmatch(r"sc://[^\s/]+(/.*)?|local(\[(\d+|\*)\])?", text):
        raise argparse.ArgumentTypeError(
            f"expected sc://host:15002 or local[2], got {excerpt(text)}"
        )
    return text


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a share between 0 and 1, got {excerpt(text)}"
        ) from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text}")
    return value


def positive(text: str) -> int:
    """A count: a whole number, 1 or more."""
    return _whole(text, 1)


def common_options() -> argparse.ArgumentParser:
    """The options every command that runs Spark takes."""
    common = argparse.ArgumentParser(add_help=False)
    spark_opts = common.add_argument_group("Spark")
    spark_opts.add_argument(
        "--master",
        help="classic local master, e.g. local[4] (default: local[*], or $DEDUP_SPARK_MASTER)",
    )
    spark_opts.add_argument(
        "--remote",
        type=remote_url,
        help="Spark Connect: sc://host:15002, or local[2] for a local server "
        "(default: $SPARK_REMOTE when set)",
    )
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    return common
