"""Benchmark: ``dedup-lib simulate --out`` with its diagnostics against its replay alone.

Generates N sends of the day scenario (Parquet, with ground truth and ``payload_hash``) with
``dedup-lib generate``, once, then times in the same run, alternating: the replay alone (a
fresh process that reads and parses the Parquet as simulate does, runs ``detect_duplicates``
and writes the verdicts as Parquet), and ``dedup-lib simulate INPUT --out ...`` (load,
replay and write, summaries, missed resends and collisions), each in its own process, Spark's
start included in both. simulate's own progress lines give each stage's time. Target (issue
19): simulate at most 2.5x the replay alone.

    make bench-simulate                       # 10 M sends
    make bench-simulate ROWS=100000000        # 100 M: about an hour on 2 cores
    .venv/bin/python benchmarks/bench_simulate.py --input sends/ --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results_table import Figure, add_option, record, short_count

TARGET = 2.5
BIN = Path(sys.executable).parent
REPLAY_ALONE = """
import sys
from dedup_lib import DedupPolicy, detect_duplicates, get_spark
from dedup_lib.telemetry.loader import load_once
spark = get_spark("dedup-bench-replay")
sends = load_once(spark, sys.argv[1]).valid
detect_duplicates(sends, DedupPolicy("PT10M")).write.mode("overwrite").parquet(sys.argv[2])
"""
_STEP = re.compile(r"^\[\s*([\d.]+)s\] (.*)$")


def timed(command: list[str], env: dict[str, str]) -> tuple[float, list[tuple[float, str]]]:
    """Wall seconds of ``command``, and its progress lines (elapsed, text) from stderr."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    taken = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} failed:\n{done.stderr[-2000:]}")
    steps = [(float(m[1]), m[2]) for line in done.stderr.splitlines() if (m := _STEP.match(line))]
    return taken, steps


def stages(steps: list[tuple[float, str]], total: float) -> list[tuple[str, float]]:
    """Each progress line's text with the time until the next line (the last: until exit)."""
    ends = [t for t, _ in steps[1:]] + [total]
    return [(text, end - t) for (t, text), end in zip(steps, ends, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="sends (default 10 M)")
    parser.add_argument("--input", type=Path, help="sends already generated (Parquet)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    add_option(parser)
    args = parser.parse_args(argv)

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with tempfile.TemporaryDirectory(prefix="dedup-bench-simulate-") as t:
        tmp = Path(t)
        sends = args.input or tmp / "sends"
        if args.input is None:
            print(f"generating {args.rows:,} sends ...", flush=True)
            generate = [str(BIN / "dedup-lib"), "generate", str(sends), "--rows", str(args.rows)]
            subprocess.run([*generate, "--seed", "1", "--quiet"], check=True, env=env)
        replay = [sys.executable, "-c", REPLAY_ALONE, str(sends), str(tmp / "replayed")]
        simulate = [
            str(BIN / "dedup-lib"), "simulate", str(sends), "--out", str(tmp / "verdicts"),
            "--overwrite",
        ]  # fmt: skip
        rounds: list[dict[str, object]] = []
        ratios: list[tuple[float, float]] = []
        for round_ in range(args.repeat):
            alone, _ = timed(replay, env)
            print(f"  round {round_ + 1}: replay alone {alone:8.1f} s", flush=True)
            whole, steps = timed(simulate, env)
            print(f"  round {round_ + 1}: simulate     {whole:8.1f} s", flush=True)
            for text, seconds in stages(steps, whole):
                print(f"      {seconds:8.1f} s  {text[:90]}", flush=True)
            split = stages(steps, whole)
            rounds.append({"replay alone": alone, "simulate": whole, "stages": split})
            ratios.append((whole, alone))
    ratio = statistics.median(w / a for w, a in ratios)
    print(f"\nsimulate / replay alone  {ratio:5.2f}x (median of the rounds; target {TARGET}x)")
    if args.json:
        figures = {"rows": args.rows, "rounds": rounds, "ratio": ratio}
        args.json.write_text(json.dumps(figures, indent=2))
    alone = statistics.median(a for _, a in ratios)
    whole = statistics.median(w for w, _ in ratios)
    times = f"replay {alone:.1f} s, simulate {whole:.1f} s (medians, {args.repeat} rounds)"
    steps = "; ".join(f"{text[:40]} {s:.1f} s" for text, s in split)
    figures = [
        Figure(
            "simulate --out / replay alone", ratio, times, f"at most {TARGET}x", ratio <= TARGET
        ),
        Figure("simulate's stages, the last round", None, steps),
    ]
    size = f"{short_count(args.rows)} sends" if args.input is None else str(args.input)
    baseline = "the replay alone (read, parse, detect_duplicates, write), each in its own process"
    record("make bench-simulate", size, figures, baseline=baseline, enabled=not args.no_record)
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
