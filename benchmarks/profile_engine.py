"""Profile: where ``detect_duplicates`` spends its time beside the shuffle-and-sort floor.

For each row shape (narrow: ``event_id``, ``message_id``, ``send_time``, ``entity``; wide:
those plus partition key, session and a payload size, as ``make bench`` generates them;
short: narrow rows with ids as ``order-123456`` on one entity) it
runs the floor and the engine once untimed (the JIT, the file cache), then once each with

- Spark's SQL metrics per operator, read from the driver's REST API after the run: each
  whole-stage-codegen block's time, the sort's time and spill, the shuffle's bytes and write
  time, rows per operator;
- a JFR recording of the driver JVM (local mode: the executor's threads are its threads),
  started and dumped with ``jcmd`` around the run, its CPU samples summed by the frame on top
  and by what that frame belongs to (Spark's generated code, the sorter, the shuffle writer,
  hashing, the replay kernel, Parquet, compression).

What it prints is recorded by hand in benchmarks/history.md, "where the engine's time goes".

    make profile-engine                      # 10 M sends, narrow and wide
    .venv/bin/python benchmarks/profile_engine.py --rows 4000000 --shape narrow --top 25
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from bench_engine import NARROW, floor, generate
from dedup_lib import DedupPolicy, detect_duplicates, get_spark

#: What a JFR sample's time is spent for: the first frame from the top of its stack that one of
#: these patterns matches (a row's field read for a comparison is the sort's: getters match
#: nothing, the comparison below them does).
BUCKETS = (
    (
        "replay kernel (Replay.call, its argument and result conversions)",
        r"dedup_lib\.Replay|ScalaUDF|CatalystTypeConverters|RowFactory|GenericRow",
    ),
    ("hashing (xxhash64, murmur3)", r"XXH64|Murmur3|HashExpression"),
    (
        "sort (in-memory sorter, comparisons, spills)",
        r"UnsafeExternalSorter|"
        r"UnsafeInMemorySorter|RadixSort|PrefixComparator|UnsafeSorterSpill|TimSort|Ordering|"
        r"UnsafeSortDataFormat|UnsafeExternalRowSorter|RecordComparator|SortExec",
    ),
    (
        "shuffle write and read (sort shuffle, serializers, block files)",
        r"ShuffleWriter|"
        r"ShuffleExternalSorter|ShuffleBlockFetcher|ShuffleReader|UnsafeRowSerializer|"
        r"DiskBlockObjectWriter|PartitionedPairBuffer|ExternalSorter\.|BlockManager",
    ),
    ("compression (lz4, zstd, snappy)", r"lz4|LZ4|zstd|Zstd|snappy|Snappy"),
    ("Parquet read", r"parquet|Parquet|VectorizedColumnReader|ColumnVector|ColumnarToRow"),
    (
        "row building (UnsafeRow writers, projections, copies)",
        r"UnsafeRowWriter|"
        r"UnsafeWriter|UnsafeProjection|BufferHolder|UnsafeRow\.copy",
    ),
    ("Spark's generated code (whole-stage codegen)", r"GeneratedClass|GeneratedIterator"),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class SqlMetrics:
    """The SQL executions of a local session, read from its REST API (``/api/v1/.../sql``)."""

    def __init__(self, spark: SparkSession, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1/applications/{spark.conf.get('spark.app.id')}"
        self.seen = self._last_id()

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=30) as reply:
            return json.load(reply)

    def _last_id(self) -> int:
        executions = self._get("/sql?details=false&length=100000")
        return max((e["id"] for e in executions), default=-1)

    def since_last(self) -> list[dict[str, Any]]:
        """The operators of the executions run since the last call, with their metrics."""
        time.sleep(1.5)  # the listener posts the last metrics asynchronously
        nodes: list[dict[str, Any]] = []
        last = self._last_id()
        for execution in range(self.seen + 1, last + 1):
            found = self._get(f"/sql/{execution}?details=true&planDescription=false")
            nodes.extend(found.get("nodes", []))
        self.seen = last
        return nodes


_NUMBER = re.compile(r"([\d.,]+)\s*(ms|s|m|h|B|KiB|MiB|GiB|TiB)?")
_SCALE = {
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "B": 1.0,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
    None: 1.0,
}


def total(value: str) -> float:
    """A metric's total: Spark writes ``total (min, med, max ...)\\n3.2 s (...)`` or a number."""
    line = value.split("\n")[-1] if "\n" in value else value
    found = _NUMBER.search(line)
    if not found:
        return 0.0
    return float(found.group(1).replace(",", "")) * _SCALE[found.group(2)]


#: The metrics printed per operator, with their unit (s, bytes, count).
SHOWN = {
    "duration": "s",
    "sort time": "s",
    "peak memory": "B",
    "spill size": "B",
    "shuffle write time": "s",
    "shuffle bytes written": "B",
    "data size": "B",
    "fetch wait time": "s",
    "scan time": "s",
    "number of output rows": "n",
}


def operator_table(nodes: list[dict[str, Any]]) -> list[str]:
    lines = []
    for node in nodes:
        shown = []
        for metric in node.get("metrics", []):
            unit = SHOWN.get(metric["name"])
            if unit is None:
                continue
            value = total(metric["value"])
            if unit == "s":
                shown.append(f"{metric['name']} {value:.2f} s")
            elif unit == "B":
                shown.append(f"{metric['name']} {value / 2**20:.0f} MiB")
            else:
                shown.append(f"{metric['name']} {value:,.0f}")
        if shown:
            lines.append(f"    {node['nodeName'][:40]:40s} " + "; ".join(shown))
    return lines


class Recorder:
    """JFR on the driver JVM through ``jcmd``: one recording per profiled run."""

    def __init__(self, pid: int, folder: Path) -> None:
        self.pid, self.folder = pid, folder
        self.jcmd = shutil.which("jcmd") or "jcmd"
        self.jfr = shutil.which("jfr") or "jfr"

    def _cmd(self, *args: str) -> None:
        subprocess.run([self.jcmd, str(self.pid), *args], check=True, capture_output=True)

    def record(self, name: str, run: Callable[[], float]) -> tuple[float, Path]:
        target = self.folder / f"{re.sub(r'[^a-z0-9]+', '-', name.lower())}.jfr"
        self._cmd("JFR.start", f"name={target.stem}", "settings=profile")
        taken = run()
        self._cmd("JFR.stop", f"name={target.stem}", f"filename={target}")
        return taken, target

    def samples(self, recording: Path) -> list[list[str]]:
        """Each CPU sample of an executor task thread as its frames, top first."""
        printed = subprocess.run(
            [
                self.jfr,
                "print",
                "--json",
                "--stack-depth",
                "64",
                "--events",
                "jdk.ExecutionSample",
                str(recording),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        events = json.loads(printed)["recording"]["events"]
        stacks = []
        for event in events:
            values = event["values"]
            thread = (values.get("sampledThread") or {}).get("javaName") or ""
            if not thread.startswith("Executor task"):
                continue
            frames = [
                f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}"
                for f in (values.get("stackTrace") or {}).get("frames", [])
            ]
            if frames:
                stacks.append(frames)
        return stacks


def bucket(stack: list[str]) -> str:
    for frame in stack:
        for name, pattern in BUCKETS:
            if re.search(pattern, frame):
                return name
    return "other"


def sample_table(stacks: list[list[str]], top: int) -> list[str]:
    if not stacks:
        return ["    (no samples of executor threads)"]
    by_bucket = collections.Counter(bucket(s) for s in stacks)
    by_frame = collections.Counter(s[0] for s in stacks)
    kernel = sum(any("dedup_lib.Replay" in f or "ScalaUDF" in f for f in s) for s in stacks)
    n = len(stacks)
    lines = [f"    {n:,} samples of task threads, by what they were spent for:"]
    lines += [f"      {100 * c / n:5.1f} %  {name}" for name, c in by_bucket.most_common()]
    lines.append(f"      {100 * kernel / n:5.1f} %  with the replay kernel anywhere on the stack")
    lines.append(f"    top {top} frames (self):")
    lines += [f"      {100 * c / n:5.1f} %  {frame}" for frame, c in by_frame.most_common(top)]
    return lines


def noop(frame: DataFrame) -> float:
    start = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def driver_pid() -> int:
    """The driver JVM: this process's child that runs SparkSubmit."""
    import os

    found = subprocess.run(
        ["pgrep", "-P", str(os.getpid()), "-f", "SparkSubmit"], capture_output=True, text=True
    ).stdout.split()
    if not found:
        raise SystemExit("profile_engine: cannot find the driver JVM (pgrep -P ... SparkSubmit)")
    return int(found[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument(
        "--shape", choices=("narrow", "wide", "short", "both", "all"), default="both"
    )
    parser.add_argument("--window", default="PT10M")
    parser.add_argument("--top", type=int, default=20, help="frames listed per run (20)")
    parser.add_argument("--keep", type=Path, help="keep the .jfr recordings in this folder")
    args = parser.parse_args(argv)

    port = free_port()
    spark = get_spark(
        "dedup-profile", config={"spark.ui.enabled": "true", "spark.ui.port": str(port)}
    )
    metrics = SqlMetrics(spark, port)
    policy = DedupPolicy(args.window)
    shapes = {"both": ["narrow", "wide"], "all": ["narrow", "wide", "short"]}.get(
        args.shape, [args.shape]
    )
    with tempfile.TemporaryDirectory(prefix="dedup-profile-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        recorder = Recorder(driver_pid(), folder)
        print(f"generating {args.rows:,} sends ...", flush=True)
        wide = generate(spark, args.rows, 7)
        wide.write.parquet(f"{tmp}/wide")
        spark.read.parquet(f"{tmp}/wide").select(*NARROW).write.parquet(f"{tmp}/narrow")
        if "short" in shapes:
            short = generate(spark, args.rows, 7, short=True).select(*NARROW)
            short.write.parquet(f"{tmp}/short")
        for shape in shapes:
            frame = spark.read.parquet(f"{tmp}/{shape}")
            runs = {
                f"floor, {shape}": lambda f=frame: floor(f),
                f"detect_duplicates, {shape}": lambda f=frame: detect_duplicates(
                    f, policy, kernel="jvm"
                ),
            }
            for run in runs.values():
                noop(run())
            metrics.since_last()
            for name, run in runs.items():
                taken, recording = recorder.record(name, lambda r=run: noop(r()))
                print(f"\n{name}: {taken:.2f} s", flush=True)
                print("\n".join(operator_table(metrics.since_last())))
                print("\n".join(sample_table(recorder.samples(recording), args.top)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
