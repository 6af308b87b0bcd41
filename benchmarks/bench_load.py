"""Benchmark: ``load_telemetry``, with its per-file tally, against one plain scan of the files.

``load_telemetry`` reads every file once while loading: it counts per file the rows read, the
valid rows and the quarantined ones, in one pass, and decodes every value (so a damaged file
fails there). The baseline is what any reader of the same data pays at least:
one scan that decodes every value (the maximum of a hash of all columns). Both run on narrow
rows (ids and times only) and on wide ones (ten more text columns), as Parquet, interleaved
in rounds after an untimed warm-up; each ratio is the median of the ratios within a round.

    make bench-load                 # 10 M rows
    .venv/bin/python benchmarks/bench_load.py --rows 2000000 --repeat 3
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench_engine import interleaved, paired
from bench_explorer import seconds
from dedup_lib import get_spark, load_telemetry
from results_table import Figure, add_option, record, short_count

WIDE_COLUMNS = 10
TARGET = 1.5  # shown, not checked


def generate(spark: SparkSession, rows: int, path: str, *, wide: bool) -> None:
    ids = spark.range(rows)
    frame = ids.select(
        F.concat(F.lit("m-"), (F.col("id") * 7919 % rows).cast("string")).alias("message_id"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id") % 86_400).alias("send_time"),
        F.concat(F.lit("entity-"), (F.col("id") % 5).cast("string")).alias("entity"),
        *(
            [
                F.sha1(F.concat(F.col("id").cast("string"), F.lit(i))).alias(f"c{i}")
                for i in range(WIDE_COLUMNS)
            ]
            if wide
            else []
        ),
    )
    frame.write.parquet(path)


def scan(spark: SparkSession, path: str) -> None:
    frame = spark.read.parquet(path)
    frame.agg(F.max(F.xxhash64(*frame.columns))).collect()


def load(spark: SparkSession, path: str) -> None:
    loaded = load_telemetry(spark, path)
    assert loaded.counts()["quarantined"] == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="sends (default 10 M)")
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds (default 5)")
    add_option(parser)
    args = parser.parse_args(argv)

    spark = get_spark("dedup-bench-load", config={"spark.ui.enabled": "false"})
    with tempfile.TemporaryDirectory(prefix="dedup-bench-load-") as tmp:
        print(f"generating {args.rows:,} narrow and {args.rows:,} wide rows ...", flush=True)
        runs: dict[str, Callable[[], None]] = {}
        for shape in ("narrow", "wide"):
            path = f"{tmp}/{shape}"
            generate(spark, args.rows, path, wide=shape == "wide")
            runs[f"{shape}: scan of every value"] = lambda p=path: scan(spark, p)
            runs[f"{shape}: load_telemetry"] = lambda p=path: load(spark, p)
        timings = interleaved(runs, args.repeat, seconds)

    figures = []
    for shape in ("narrow", "wide"):
        base, ours = timings[f"{shape}: scan of every value"], timings[f"{shape}: load_telemetry"]
        ratio = paired(ours, base)
        raw = (
            f"load {min(ours):.2f} s, scan {min(base):.2f} s "
            f"(best of {args.repeat}: {min(ours) / min(base):.2f}x)"
        )
        figures.append(
            Figure(
                f"{shape} rows: load_telemetry / scan", ratio, raw, "at most 1.5x", ratio <= TARGET
            )
        )
    baseline = "one scan decoding every value of the same Parquet files"
    record(
        "make bench-load",
        f"{short_count(args.rows)} rows",
        figures,
        baseline=baseline,
        enabled=not args.no_record,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
