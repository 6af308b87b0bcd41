"""Benchmark: the live monitor against the batch replay of the same sends.

Generates N sends of the day scenario as F files in a landing folder, then times, in the same
run and interleaved: the batch replay (``load_telemetry`` then ``detect_duplicates``, to a
no-op sink) and ``watch_duplicates(once=True)`` over the same files from a fresh checkpoint
(its two queries, every micro-batch, the verdicts written). Prints sends judged per second
for both, the ratio of their times (median over the rounds of the ratio within a round), and
the size of the state at the end against the keys sent within the window plus the lateness
of the last send (what the state must hold, at most).

    make bench-watch                 # 1 M sends, 8 files
    .venv/bin/python benchmarks/bench_watch.py --rows 200000 --repeat 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import interleaved, paired
from bench_explorer import seconds
from dedup_lib import (
    DedupPolicy,
    detect_duplicates,
    generate_telemetry,
    get_spark,
    load_telemetry,
    watch_duplicates,
)

POLICY = DedupPolicy("PT10M")
LATENESS = "PT1M"


def land(spark: SparkSession, rows: int, files: int, folder: str) -> int:
    """The day scenario's sends in ``files`` Parquet files, by send time; the valid count."""
    sends = generate_telemetry(spark, rows, seed=1)
    tiles = sends.withColumn("__file", F.ntile(files).over(_by_time()))
    tiles.repartition(files, "__file").sortWithinPartitions("send_time").drop(
        "__file"
    ).write.parquet(folder)
    return int(load_telemetry(spark, folder).valid.count())


def _by_time():  # type: ignore[no-untyped-def]
    from pyspark.sql import Window

    return Window.orderBy("send_time")


def batch(spark: SparkSession, folder: str) -> None:
    result = detect_duplicates(load_telemetry(spark, folder).valid, POLICY)
    result.write.format("noop").mode("overwrite").save()


def watch(spark: SparkSession, folder: str, scratch: str) -> None:
    shutil.rmtree(scratch, ignore_errors=True)
    watch_duplicates(
        spark,
        folder,
        POLICY,
        LATENESS,
        out=f"{scratch}/out",
        checkpoint=f"{scratch}/ck",
        once=True,
    )


def state_size(spark: SparkSession, scratch: str, folder: str) -> tuple[int, int]:
    """Anchors held at the end, and the keys sent within window plus lateness of the end."""
    judge = f"{scratch}/ck/judge"
    held = spark.read.format("statestore").option("stateVarName", "anchors").load(judge).count()
    valid = load_telemetry(spark, folder).valid
    last = valid.agg(F.max("send_time")).first()[0]
    since = F.lit(last) - F.expr("INTERVAL 11 MINUTES")
    keys = valid.where(F.col("send_time") >= since).select("entity", "message_id").distinct()
    return held, keys.count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="sends (default 1 M)")
    parser.add_argument("--files", type=int, default=8, help="files landed (default 8)")
    parser.add_argument("--repeat", type=int, default=2, help="timed rounds (default 2)")
    args = parser.parse_args(argv)

    spark = get_spark("dedup-bench-watch", config={"spark.ui.enabled": "false"})
    with tempfile.TemporaryDirectory(prefix="dedup-bench-watch-") as tmp:
        folder, scratch = os.path.join(tmp, "landing"), os.path.join(tmp, "watch")
        print(f"landing {args.rows:,} sends of the day scenario as {args.files} files ...")
        valid = land(spark, args.rows, args.files, folder)
        runs = {
            "batch: load_telemetry + detect_duplicates": lambda: batch(spark, folder),
            "watch_duplicates(once=True)": lambda: watch(spark, folder, scratch),
        }
        timings = interleaved(runs, args.repeat, seconds)
        held, keys = state_size(spark, scratch, folder)

    base_name, ours_name = runs
    base, ours = timings[base_name], timings[ours_name]
    print()
    print(f"{valid:,} valid sends, {os.cpu_count()} cores")
    print(f"batch replay   {valid / min(base):10,.0f} sends/s  (best {min(base):.1f} s)")
    print(f"live monitor   {valid / min(ours):10,.0f} sends/s  (best {min(ours):.1f} s)")
    print(f"monitor / batch  {paired(ours, base):5.2f}x")
    print(f"state at the end: {held:,} anchors; {keys:,} keys sent within window + lateness")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
