"""Benchmark: ``generate_telemetry`` against the shuffle-and-sort floor of the same rows.

Times, in one run: generating N sends of the day scenario to a no-op sink, generating them to
Parquet (what ``dedup-lib generate`` does), and the floor of bench_engine (repartition by key,
sort within partitions) over the written rows. Ratios are against that floor, measured in the
same run, because this machine is shared.

    make bench-synth                # 10 M rows
    .venv/bin/python benchmarks/bench_synth.py --rows 2000000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

from bench_engine import floor, timed
from dedup_lib import generate_telemetry, get_spark
from dedup_lib.synth import day_scenario
from results_table import Figure, add_option, record, short_count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="sends (default 10 M)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs of each (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    add_option(parser)
    args = parser.parse_args(argv)

    spark = get_spark("dedup-bench-synth", config={"spark.ui.enabled": "false"})
    # Timestamps, not text: malformed rows would make send_time a string column.
    scenario = dataclasses.replace(day_scenario(), malformed=0.0)
    frame = generate_telemetry(spark, args.rows, seed=args.seed, scenario=scenario)
    with tempfile.TemporaryDirectory(prefix="dedup-bench-synth-") as tmp:
        timed(lambda: generate_telemetry(spark, 100_000, scenario=scenario))  # warm-up
        timings: dict[str, list[float]] = {
            "generate to a no-op sink": [],
            "generate to Parquet": [],
        }
        timings["floor (shuffle + sort)"] = []
        for round_ in range(args.repeat):
            seconds = timed(lambda: frame)
            timings["generate to a no-op sink"].append(seconds)
            start = time.perf_counter()
            frame.write.mode("overwrite").parquet(f"{tmp}/sends")
            timings["generate to Parquet"].append(time.perf_counter() - start)
            written = spark.read.parquet(f"{tmp}/sends")
            timings["floor (shuffle + sort)"].append(timed(lambda df=written: floor(df)))
            for name, values in timings.items():
                print(f"  round {round_ + 1}: {name:24s} {values[-1]:7.2f} s", flush=True)
        rows = spark.read.parquet(f"{tmp}/sends").count()

    best = {name: min(values) for name, values in timings.items()}
    base = best["floor (shuffle + sort)"]
    print(f"\n{rows:,} sends generated (asked for about {args.rows:,})")
    for name, seconds in best.items():
        print(f"{name:24s} best {seconds:7.2f} s   {seconds / base:5.2f}x the floor   "
              f"{rows / seconds / 1e6:5.2f} M rows/s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "timings": timings}, indent=2))
    figures = [
        Figure(
            f"{name} / floor",
            best[name] / base,
            f"generate {best[name]:.1f} s, floor {base:.1f} s (best of {args.repeat}; "
            f"{rows / best[name] / 1e6:.2f} M sends/s)",
        )
        for name in ("generate to a no-op sink", "generate to Parquet")
    ]
    baseline = "the floor of make bench (a shuffle and sort) over the rows written"
    record(
        "make bench-synth",
        f"{short_count(args.rows)} sends",
        figures,
        baseline=baseline,
        enabled=not args.no_record,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
