"""What the commands print: progress lines on stderr, notes, small tables as text, a
policy in one line; and the Spark session a command runs on (:func:`start_spark`)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from dedup_lib.cli.options import PROG
from dedup_lib.errors import printable
from dedup_lib.rules.durations import format_duration
from dedup_lib.rules.policy import DedupPolicy, Policies
from dedup_lib.spark import (
    get_spark,
    is_connect,
)
from dedup_lib.text import escape, shown

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pandas as pd
    from pyspark.sql import SparkSession


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


def start_spark(
    args: argparse.Namespace, *, ui: bool = True, config: dict[str, str] | None = None
) -> SparkSession:
    """The session a command runs on: the one it was given (tests, notebooks), else one
    started from ``--remote``/``--master`` with ``config``, with Connect's progress on a
    terminal. Spark listens on 127.0.0.1 only, but where ``--driver-host`` and ``--spark-ui``
    say; ``ui`` False: a command without Spark's UI unless ``--spark-ui`` asks for it."""
    if args.spark is not None:
        session: SparkSession = args.spark
        return session
    quiet = args.quiet
    spark = get_spark(
        PROG,
        remote=args.remote,
        master=args.master,
        driver_host=args.driver_host,
        ui=args.spark_ui or (None if ui else "off"),
        config=config,
    )
    if is_connect(spark) and not quiet and sys.stderr.isatty():
        spark.registerProgressHandler(connect_progress)  # type: ignore[arg-type]
    return spark


def print_note(note: str) -> None:
    """One of what a load did that the user should know (``LoadedTelemetry.notes``,
    ``Watch.notes``), as every command prints it."""
    print(f"Note: {note}.")


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


def describe(policy: Policies) -> str:
    """One line for a policy, or for per-entity settings: each entity's window and mode."""
    if isinstance(policy, DedupPolicy):
        return policy.describe()
    each = [
        f"{escape(name, 'text')} {'detection off' if p is None else p.describe()}"
        for name, p in sorted(policy.items())
    ]
    return "per-entity settings: " + "; ".join(each)
