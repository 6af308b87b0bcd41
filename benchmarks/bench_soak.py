"""Benchmark: the live monitor's memory over a long, steady feed (issue 70, "runs for weeks").

Generates the day scenario's sends with ``dedup-lib generate`` (as many as the run lands),
then starts ``dedup-lib watch`` as a command line in a process of its own, serving
``--metrics`` on a free 127.0.0.1 port, and lands a Parquet file into its folder every
``--every`` seconds for ``--minutes``: the sends in send-time order, their send times (and
scheduled times) moved to advance with the wall clock at ``--rate`` sends a second, so that
the watermark follows the clock and the state, keys within ``--window`` (and contents within
``--resend-horizon``), reaches a steady size. The landing folder keeps the last ``--keep``
files (a writer's retention: older ones are removed, as a rotating Collector removes them).

Every ``--sample`` seconds it scrapes ``/metrics`` (as Prometheus would: the monitor's
``process_resident_memory_bytes``, the keys held, the micro-batches) and reads the resident
memory of the monitor's Python and of its JVM (the ``java`` process under it) from
``/proc/PID/status`` (``VmRSS``, and its anonymous and file-backed parts). The run is cut in
quarters of time; it PASSES when both are flat: the last quarter's mean resident memory
within 1.1x the second quarter's (the first holds the start and the state's filling).

Diagnosis, when a quarter grows: ``--tracemalloc N`` runs the monitor's Python under
``tracemalloc`` (N frames) and prints what grew between the second quarter's end and the
run's (Python's allocations, by where they were made); ``--jvm-histograms`` takes
``jcmd PID GC.class_histogram`` (a full collection) at each quarter's end and prints the
classes that grew. Both change the memory they measure: not for the figures.

    make bench-soak                                           # an hour, a file every 4 s
    make bench-soak MINUTES=180
    .venv/bin/python benchmarks/bench_soak.py --minutes 12 --window PT2M --resend-horizon PT2M \\
        --tracemalloc 12 --jvm-histograms
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from results_table import Figure, add_option, record, short_count
from soak_monitor import PROBED, Monitor, histogram

#: The last quarter's mean against the second's, at most.
FLAT = 1.1
MIB = 2**20
_UTC = pa.timestamp("us", tz="UTC")


def generate(path: Path, rows: int, seed: int, master: str) -> None:
    """The day scenario's sends as one Parquet file, by send time (the library's generator)."""
    command = [str(Path(sys.executable).parent / "dedup-lib"), "generate", str(path)]
    command += ["--scenario", "day", "--rows", str(rows), "--seed", str(seed)]
    command += ["--single-file", "--overwrite", "--quiet", "--master", master]
    subprocess.run(command, check=True)


def rows_of(path: Path, per_file: int) -> Iterator[pa.Table]:
    """The file's rows, ``per_file`` at a time, in order (a partial last table)."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=per_file):
        held.append(batch)
        count += batch.num_rows
        while count >= per_file:
            table = pa.Table.from_batches(held)
            yield table.slice(0, per_file)
            rest = table.slice(per_file).combine_chunks()
            held, count = rest.to_batches(), rest.num_rows
    if count:
        yield pa.Table.from_batches(held)


def moved(table: pa.Table, first_us: int, step_us: float) -> pa.Table:
    """The sends with their send times ``first_us`` on, ``step_us`` apart, in their order; a
    send time that does not read is left as it is (the load quarantines it), and a scheduled
    time moves by as much as its send time."""
    text = table["send_time"].combine_chunks()
    new = first_us + (np.arange(len(text)) * step_us).astype(np.int64)
    parsed = pd.to_datetime(text.to_pandas(), errors="coerce", utc=True, format="ISO8601")
    ok = (text.to_pandas().str.endswith("Z") & parsed.notna()).to_numpy()
    readable = pa.array(ok)
    old = np.where(ok, parsed.to_numpy(dtype="datetime64[us]", na_value=0).astype(np.int64), 0)
    shown = pc.strftime(pa.array(new).cast(_UTC), format="%Y-%m-%dT%H:%M:%SZ")
    table = table.set_column(
        table.schema.get_field_index("send_time"), "send_time", pc.if_else(readable, shown, text)
    )
    if "scheduled_enqueue_time" in table.column_names:
        place = table.schema.get_field_index("scheduled_enqueue_time")
        scheduled = table[place].combine_chunks()
        shift = pa.array(np.where(ok, new - old, 0) * 1000, pa.int64())
        as_ns = pc.cast(scheduled, pa.int64())
        table = table.set_column(
            place,
            "scheduled_enqueue_time",
            pc.cast(pc.add(as_ns, shift), pa.int64()).cast(scheduled.type),
        )
    return table


def quarters(samples: list[dict[str, Any]], seconds: float) -> list[dict[str, float]]:
    """Means and peaks of each quarter of the run's time."""
    rows = []
    for q in range(4):
        inside = [s for s in samples if q * seconds / 4 <= s["t"] < (q + 1) * seconds / 4]
        if not inside:
            inside = [samples[-1]]

        def mean(name: str, inside: list[dict[str, Any]] = inside) -> float:
            values = [s[name] for s in inside if name in s]
            return statistics.fmean(values) if values else float("nan")

        rows.append(
            {
                "quarter": q + 1,
                "from (min)": q * seconds / 240,
                "samples": len(inside),
                "Python RSS (MiB)": mean("python") / MIB,
                "Python RSS, peak (MiB)": max(s["python"] for s in inside) / MIB,
                "Python anonymous (MiB)": mean("python_anon") / MIB,
                "Python file-backed (MiB)": mean("python_file") / MIB,
                "/metrics RSS (MiB)": mean("process_resident_memory_bytes") / MIB,
                "JVM RSS (MiB)": mean("jvm") / MIB,
                "JVM RSS, peak (MiB)": max(s["jvm"] for s in inside) / MIB,
                "keys held": mean("dedup_state_keys"),
                "checkpoint (MiB)": mean("checkpoint") / MIB,
                "state store (MiB)": mean("dedup_state_bytes_disk") / MIB,
                "micro-batches at the end": inside[-1].get("dedup_micro_batches_total", 0),
            }
        )
    return rows


def trend(samples: list[dict[str, Any]], name: str, seconds: float) -> float:
    """MiB an hour, the least-squares slope of ``name`` over the run's second half."""
    half = [s for s in samples if s["t"] >= seconds / 2]
    if len(half) < 3:
        return float("nan")
    t = np.array([s["t"] for s in half]) / 3600
    y = np.array([s[name] for s in half]) / MIB
    return float(np.polyfit(t, y, 1)[0])


def grown_python(snapshots: Path, limit: int = 15) -> list[str]:
    """What Python allocated more of between the second quarter's snapshot and the last."""
    import tracemalloc

    taken = sorted(snapshots.glob("snapshot-*.pickle"), key=lambda p: int(p.stem.split("-")[1]))
    if len(taken) < 2:
        return []
    before = tracemalloc.Snapshot.load(str(taken[min(1, len(taken) - 2)]))
    after = tracemalloc.Snapshot.load(str(taken[-1]))
    lines = []
    for stat in after.compare_to(before, "traceback")[:limit]:
        where = " <- ".join(
            f"{Path(f.filename).name}:{f.lineno}" for f in list(stat.traceback)[::-1][:6]
        )
        lines.append(
            f"{stat.size_diff / MIB:+8.2f} MiB {stat.count_diff:+9,d} blocks "
            f"(now {stat.size / MIB:.2f} MiB)  {where}"
        )
    return lines


def grown_jvm(histograms: list[dict[str, int]], limit: int = 15) -> list[str]:
    """The classes whose bytes grew most from the second quarter's end to the last."""
    if len(histograms) < 2:
        return []
    before, after = histograms[min(1, len(histograms) - 2)], histograms[-1]
    grown = sorted(after, key=lambda c: after[c] - before.get(c, 0), reverse=True)[:limit]
    return [
        f"{(after[c] - before.get(c, 0)) / MIB:+8.2f} MiB (now {after[c] / MIB:.2f} MiB)  {c}"
        for c in grown
    ]


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    seconds = args.minutes * 60
    per_file = max(1, round(args.rate * args.every))
    files = int(seconds // args.every)
    pool = args.data or work / "sends.parquet"
    if args.data is None:
        started = time.monotonic()
        generate(pool, per_file * (files + 1), args.seed, args.master)
        print(f"generated {per_file * (files + 1):,} sends in {time.monotonic() - started:.0f} s")
    landing = work / "landing"
    landing.mkdir()
    source = rows_of(pool, per_file)
    step_us = 1e6 / args.rate
    landed: list[Path] = []

    def land(i: int, first: float) -> bool:
        """File ``i``, its send times from ``first`` (Unix time) on; False when none is left."""
        sends = next(source, None)
        if sends is None:  # --data holds fewer sends than the run lands
            return False
        hidden = landing / f".sends-{i:06d}.parquet"
        table = moved(sends, int(first * 1e6), step_us)
        # Spark reads no nanosecond timestamps: microseconds, as Spark writes them.
        pq.write_table(table, hidden, coerce_timestamps="us", allow_truncated_timestamps=True)
        landed.append(landing / f"sends-{i:06d}.parquet")
        os.replace(hidden, landed[-1])
        if args.keep and len(landed) > args.keep:
            landed.pop(0).unlink()
        return True

    # The monitor reads the folder's schema when it starts: a first file is there.
    land(0, time.time())
    monitor = Monitor(work, args)
    shown = ["<probe>" if part == PROBED else part for part in monitor.command]
    print("monitor: " + " ".join(shown))
    samples: list[dict[str, Any]] = []
    histograms: list[dict[str, int]] = []
    i = 1
    try:
        monitor.wait_ready(600)
        print(
            f"landing {files} files of {per_file:,} sends, one every {args.every:g} s for "
            f"{args.minutes:g} min; python pid {monitor.process.pid}, java {monitor.java}"
        )
        start = time.time()
        begun = time.monotonic()
        marks = [seconds * q / 4 for q in (1, 2, 3)] + [seconds - min(args.sample, 5)]
        next_sample = 0.0
        while True:
            now = time.monotonic() - begun
            if now >= seconds:
                break
            if marks and now >= marks[0]:
                marks.pop(0)
                if monitor.probed:
                    monitor.process.send_signal(signal.SIGUSR1)
                if args.jvm_histograms and monitor.java:
                    histograms.append(histogram(monitor.java[0]))
            if now >= next_sample:
                samples.append(monitor.sample(now))
                next_sample += args.sample
            if i <= files and now >= i * args.every:
                if not land(i, start + (i - 1) * args.every):
                    files = i - 1
                i += 1
                continue
            due = min(next_sample, i * args.every if i <= files else seconds, seconds)
            time.sleep(max(0.0, min(due - (time.monotonic() - begun), 1.0)))
        samples.append(monitor.sample(time.monotonic() - begun))
        if monitor.probed:
            # The last snapshot written.
            time.sleep(args.tracemalloc_wait if args.tracemalloc else 5)
    finally:
        code = monitor.stop()
    if code != 0:
        print(monitor.tail(), file=sys.stderr)
    table = quarters(samples, seconds)
    last = samples[-1]
    return {
        "minutes": args.minutes,
        "every (s)": args.every,
        "sends per second": args.rate,
        "sends per file": per_file,
        "files landed": min(i, files + 1),
        "window": args.window,
        "resend horizon": args.resend_horizon,
        "state": args.state,
        "lateness": args.lateness,
        "files kept": args.keep,
        "master": args.master,
        "traced": bool(args.tracemalloc),
        "monitor exit code": code,
        "micro-batches": last.get("dedup_micro_batches_total"),
        "rows read": last.get("dedup_rows_read_total"),
        "quarters": table,
        "Python last / second quarter": table[3]["Python RSS (MiB)"] / table[1]["Python RSS (MiB)"],
        "JVM last / second quarter": table[3]["JVM RSS (MiB)"] / table[1]["JVM RSS (MiB)"],
        "Python trend over the second half (MiB/h)": trend(samples, "python", seconds),
        "JVM trend over the second half (MiB/h)": trend(samples, "jvm", seconds),
        "Python grown (tracemalloc)": grown_python(monitor.snapshots),
        "Python's allocators at each quarter's end": [
            json.loads(p.read_text()) for p in sorted(monitor.snapshots.glob("held-*.json"))
        ],
        "JVM grown (class histogram)": grown_jvm(histograms),
        "samples": samples,
    }


def _keys(held: float) -> str:
    """The keys held, or why there is no figure: ``dedup_state_keys`` was not served (a
    checkpoint that did not count them from its start)."""
    return "not served" if math.isnan(held) else short_count(int(held))


def _held(keys: float) -> str:
    """The keys held in a quarter's row: a count, or a dash where none is served."""
    return "—" if math.isnan(keys) else f"{keys:,.0f}"


def show(result: dict[str, Any]) -> bool:
    print(
        f"\n{result['files landed']} files, {result['rows read'] or 0:,.0f} rows read in "
        f"{result['micro-batches'] or 0:,.0f} micro-batches; window {result['window']}, "
        f"resend horizon {result['resend horizon']}, the state on the {result.get('state')}"
    )
    print(
        "quarter  from   Python RSS MiB (anon, file; /metrics)   JVM RSS MiB (peak)   "
        "keys held  micro-batches  checkpoint MiB (state store)"
    )
    for q in result["quarters"]:
        print(
            f"{q['quarter']:7d} {q['from (min)']:5.1f}  {q['Python RSS (MiB)']:7.1f} "
            f"({q['Python anonymous (MiB)']:6.1f}, {q['Python file-backed (MiB)']:5.1f}; "
            f"{q['/metrics RSS (MiB)']:6.1f})      {q['JVM RSS (MiB)']:7.1f} "
            f"({q['JVM RSS, peak (MiB)']:7.1f})   {_held(q['keys held']):>9}  "
            f"{q['micro-batches at the end']:13,.0f}  {q['checkpoint (MiB)']:10.1f} "
            f"({q['state store (MiB)']:.1f})"
        )
    python, jvm = result["Python last / second quarter"], result["JVM last / second quarter"]
    flat = python <= FLAT and jvm <= FLAT and result["monitor exit code"] == 0
    print(
        f"last / second quarter: Python {python:.3f}x, JVM {jvm:.3f}x (at most {FLAT}x); "
        f"second half's trend: Python {result['Python trend over the second half (MiB/h)']:+.1f}"
        f" MiB/h, JVM {result['JVM trend over the second half (MiB/h)']:+.1f} MiB/h: "
        f"{'PASS' if flat else 'FAIL'}"
    )
    for held in result["Python's allocators at each quarter's end"]:
        print(
            "allocators: "
            + ", ".join(
                f"{k} {v / MIB:.1f} MiB" if isinstance(v, int) else f"{k} {v}"
                for k, v in held.items()
            )
        )
    for title in ("Python grown (tracemalloc)", "JVM grown (class histogram)"):
        if result[title]:
            print(f"\n{title}, second quarter's end to the last:")
            print("\n".join(result[title]))
    return flat


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60, help="how long it lands (60)")
    parser.add_argument("--every", type=float, default=4.0, help="seconds between files (4)")
    parser.add_argument("--rate", type=float, default=1800, help="sends a second (1800)")
    parser.add_argument("--window", default="PT10M", help="the monitor's window (PT10M)")
    parser.add_argument(
        "--resend-horizon",
        default="PT10M",
        help="the monitor's resend horizon (PT10M: its state steady within the first quarter)",
    )
    parser.add_argument("--lateness", default="PT1M", help="the monitor's lateness (PT1M)")
    parser.add_argument(
        "--keep", type=int, default=150, help="files the folder keeps, 0 all (150: 10 min)"
    )
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--master", default="local[1]", help="Spark's master (local[1])")
    parser.add_argument(
        "--state", choices=("driver", "executors"), default="driver",
        help="where the monitor keeps its state (driver)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, help="sends already generated (one Parquet file)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES")
    parser.add_argument("--tracemalloc-wait", type=float, default=60.0, help=argparse.SUPPRESS)
    parser.add_argument("--allocators", action="store_true", help="Arrow's and malloc's bytes")
    parser.add_argument("--jvm-histograms", action="store_true")
    parser.add_argument("--workdir", type=Path, help="kept after the run (default: a temp one)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    add_option(parser)
    args = parser.parse_args(argv)

    if args.workdir is not None:
        shutil.rmtree(args.workdir, ignore_errors=True)
        args.workdir.mkdir(parents=True)
        result = run(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="dedup-bench-soak-") as tmp:
            result = run(args, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    flat = show(result)
    figures = [
        Figure(
            f"{name} RSS, last / second quarter",
            result[f"{name} last / second quarter"],
            ", ".join(f"{q[f'{name} RSS (MiB)']:,.0f}" for q in result["quarters"])
            + " MiB by quarter",
            f"at most {FLAT}x",
            result[f"{name} last / second quarter"] <= FLAT,
        )
        for name in ("Python", "JVM")
    ] + [Figure("keys held, last quarter", None, _keys(result["quarters"][3]["keys held"]))]
    size = f"{args.minutes:g} min, {args.window}"
    baseline = "the same run's second quarter (the first holds the start and the state's filling)"
    record("make bench-soak", size, figures, baseline=baseline, enabled=not args.no_record)
    return 0 if flat else 1


if __name__ == "__main__":
    raise SystemExit(main())
