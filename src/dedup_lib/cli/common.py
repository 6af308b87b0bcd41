"""What the commands share: errors the user can fix, progress lines, the Spark session, and
small tables printed as text."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

import pandas as pd

from dedup_lib.errors import DedupLibError
from dedup_lib.rules.durations import format_duration
from dedup_lib.spark import get_spark, is_connect

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pyspark.sql import SparkSession

PROG = "dedup-lib"


class CommandError(DedupLibError):
    """A problem with the command line the user can fix: reported as one line, exit status 1."""


class Progress:
    """Step lines on stderr, with the seconds each took."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.perf_counter()

    def step(self, text: str) -> None:
        if not self.quiet:
            elapsed = time.perf_counter() - self.started
            print(f"[{elapsed:7.1f}s] {text}", file=sys.stderr, flush=True)


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
    config = {"spark.ui.showConsoleProgress": "false" if quiet else "true"}
    spark = get_spark(PROG, remote=args.remote, master=args.master, config=config)
    if is_connect(spark) and not quiet and sys.stderr.isatty():
        spark.registerProgressHandler(connect_progress)  # type: ignore[arg-type]
    return spark


def column_mapping(pairs: Sequence[str]) -> dict[str, str]:
    mapping = {}
    for pair in pairs:
        source, sep, target = pair.partition("=")
        if not sep or not source or not target:
            raise CommandError(f"--map {pair!r}: expected SOURCE=CANONICAL, e.g. Id=message_id")
        mapping[source] = target
    return mapping


def text_table(df: pd.DataFrame) -> str:
    shown = df.copy()
    for name in shown.columns:
        if name.startswith("share"):
            shown[name] = shown[name].map(lambda v: "-" if pd.isna(v) else f"{v:.1%}")
        elif name.endswith(("delay", "caught_from")):
            shown[name] = shown[name].map(lambda v: format_duration(v, "up"))
        elif name in ("first", "last"):
            shown[name] = shown[name].map(lambda t: t.strftime("%Y-%m-%d %H:%M:%S"))
    return shown.to_string(index=False)


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a share between 0 and 1, got {text!r}"
        ) from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text}")
    return value


def positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


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
        help="Spark Connect: sc://host:15002, or local[2] for a local server "
        "(default: $SPARK_REMOTE when set)",
    )
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    return common
