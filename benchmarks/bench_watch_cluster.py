"""Benchmark: the state on the executors on a standalone cluster, with a 1 GiB driver.

Issue 71 asks that the driver stay small whatever the keys held: with
``spark.driver.memory=1g``, the driver's JVM and its Python each under 1 GiB at 6 M sends of
a P7D window (every key held for the whole run), on a standalone cluster whose executor has
Spark's default heap (1 GiB), each file a micro-batch of a million sends.

The run, in order:

- the day scenario's N sends in F Parquet files of equal size, by send time
  (``bench_watch.land_files``), written by a local Spark in a child process (its JVM gone
  before the cluster's driver starts), kept under ``build/bench-cluster/`` for the next run;
- a standalone master, a worker and a Connect server (``tests/cluster_kit.py``, as the cluster
  tests start them; the Connect server idles), and this process's session on the master:
  its driver JVM at 1 GiB, one executor of 2 cores at Spark's default heap;
- the baseline: the batch replay of the F files on the same application
  (``load_telemetry``, ``detect_duplicates``, a no-op sink);
- the files landed one at a time, each once the one before is judged, into the monitor's
  state on the executors, as ``watch --state executors`` drives it (``bench_watch``'s
  ``on_the_executors``);
- every 0.2 s throughout the monitor's run, the resident memory of this process (the driver's
  Python), of its JVM (the driver) and of the application's executor.

Printed and recorded: the monitor against the batch replay, sends a second, the late files'
cost against the early ones', the three peaks against 1 GiB, the state store on disk, and the
executor's resident memory at the end split into its heap, what its JVM accounts for beside
the heap (native memory tracking, on in the executor for this run) and what lies outside the
JVM's accounting (RocksDB, the allocator).

    make bench-watch-cluster                                  # 6 M sends, P7D, 6 files
    .venv/bin/python benchmarks/bench_watch_cluster.py --rows 200000 --files 2 --no-record
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bench_watch import LATENESS, Peaks, _children, _parent, _rss, batch, on_the_executors
from cluster_kit import running
from dedup_lib import get_spark
from results_table import Figure, add_option, record, short_count

HERE = Path(__file__).resolve().parent
FOLDER = HERE.parent / "build" / "bench-cluster"
#: The driver's heap the issue measures at, and what each peak must stay under.
DRIVER_MEMORY = "1g"
GIB = 2**30


def _commands(pids: list[int]) -> dict[int, bytes]:
    """Each process's command line."""
    found = {}
    for pid in pids:
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
    return found


class ClusterPeaks(Peaks):
    """:class:`bench_watch.Peaks` on a cluster: this process's JVM is its child that PySpark
    launched (the cluster's JVMs are its children too), and the application's executor (the
    worker's child whose command names the application) is sampled beside it."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id.encode()
        self.executor = 0
        #: The executor's process, once seen, and how often a child of it was seen beside it.
        self.pid: int | None = None
        self.forks = 0
        #: The executor's heap, as the worker launched it (``-Xmx``).
        self.heap = "?"
        super().__init__()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            mine = _commands(_children(os.getpid()))
            every = _commands([int(e) for e in os.listdir("/proc") if e.isdigit()])
            driver = [p for p, c in mine.items() if b"pyspark-shell" in c]
            named = {p for p, c in every.items() if b"ExecutorBackend" in c and self.app_id in c}
            # A child the executor spawns (Hadoop's local file system runs `chmod` where its
            # native library is missing) shares the executor's memory and command line until
            # it runs its program: counted too, it doubled the peak.
            executor = [p for p in named if _parent(p) not in named]
            self.forks += len(named) - len(executor)
            self.pid = executor[0] if executor else self.pid
            for flag in (f for p in executor for f in every[p].split(b"\0")):
                if flag.startswith(b"-Xmx"):
                    self.heap = flag[4:].decode()
            self.python = max(self.python, _rss(os.getpid()))
            self.jvm = max(self.jvm, sum(_rss(pid) for pid in driver))
            self.executor = max(self.executor, sum(_rss(pid) for pid in executor))

    def peaks(self) -> dict[str, float]:
        """Stopped: the peaks, GiB (the executor's heap in :attr:`heap`)."""
        python, jvm = self.stop()
        return {
            "driver's Python": python,
            "driver's JVM": jvm,
            "executor's JVM": self.executor / GIB,
        }


#: The executor's JVM keeps a summary of its own memory (native memory tracking), which
#: ``jcmd`` reads at the end of the run: what the JVM accounts for against its resident memory.
EXECUTOR_OPTIONS = {"spark.executor.extraJavaOptions": "-XX:NativeMemoryTracking=summary"}
_COMMITTED = r"committed=(\d+)KB"


def executor_memory(pid: int | None) -> dict[str, float]:
    """The executor's memory now, GiB: ``resident``, and of it the JVM's own accounting (native
    memory tracking): the ``heap`` committed and the rest the JVM allocates beside it (``jvm``:
    metaspace, direct buffers, the collector's and the compiler's); and what lies ``outside``
    it (RocksDB's block cache and write buffers, the allocator's overhead). Empty when the
    executor is gone."""
    if pid is None or not _rss(pid):
        return {}
    printed = subprocess.run(
        ["jcmd", str(pid), "VM.native_memory", "summary"], capture_output=True, text=True
    ).stdout
    total = re.search(r"Total: reserved=\d+KB, " + _COMMITTED, printed)
    heap = re.search(r"Java Heap \(reserved=\d+KB, " + _COMMITTED, printed)
    if total is None or heap is None:
        return {}
    resident, accounted = _rss(pid) / GIB, int(total[1]) * 1024 / GIB
    committed = int(heap[1]) * 1024 / GIB
    return {
        "resident": resident,
        "heap": committed,
        "jvm": accounted - committed,
        "outside": resident - accounted,
    }


def generate(rows: int, files: int) -> list[str]:
    """The ``files`` files of ``rows`` sends, written by a child process on first use."""
    folder = FOLDER / f"sends-{rows}-{files}"
    done = FOLDER / f"sends-{rows}-{files}.json"
    if not done.exists():
        code = "import sys, json; sys.path[:0] = sys.argv[4:]; " + (
            "from bench_watch import land_files; from dedup_lib import get_spark; "
            "s = get_spark('dedup-bench-generate', config={'spark.ui.enabled': 'false'}); "
            "paths = land_files(s, int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]); "
            "open(sys.argv[3] + '.json', 'w').write(json.dumps(paths))"
        )
        subprocess.run(
            [sys.executable, "-c", code, str(rows), str(files), str(folder), str(HERE)],
            check=True,
        )
    return json.loads(done.read_text())


def measure(rows: int, files: int, window: str, master: str) -> dict:
    """The batch replay, then the monitor on the executors, on one application of
    ``master`` with a 1 GiB driver; the figures."""
    paths = generate(rows, files)
    os.environ["DEDUP_DRIVER_MEMORY"] = DRIVER_MEMORY
    spark = get_spark("dedup-bench-watch-cluster", master=master, config=EXECUTOR_OPTIONS)
    app = spark.conf.get("spark.app.id")
    base = batch(spark, paths, window)
    peaks = ClusterPeaks(app)
    scratch = str(FOLDER / "run")
    elapsed, costs, disk = on_the_executors(spark, paths, window, scratch)
    at_the_end = executor_memory(peaks.pid)
    peak = peaks.peaks()
    spark.stop()
    driver = {k: v for k, v in peak.items() if k.startswith("driver")}
    early, late = costs[1:4], costs[-3:]
    return {
        "rows": rows,
        "files": files,
        "window": window,
        "lateness": LATENESS,
        "batch s": base,
        "executors s": elapsed,
        "executors / batch": elapsed / base,
        "sends a second": rows / elapsed,
        "file costs s": costs,
        "late files / early files": statistics.median(late) / statistics.median(early or late),
        "state store on disk GB": disk / 1e9,
        "peaks GiB": driver,
        "executor's JVM, peak GiB": peak["executor's JVM"],
        "executor's heap": peaks.heap,
        "executor's children seen beside it": peaks.forks,
        "executor's memory at the end, GiB": at_the_end,
    }


def _figures(m: dict) -> list[Figure]:
    peaks = m["peaks GiB"]
    under = [Figure(f"{name}, peak resident", None, f"{gib:.2f} GiB",
                    f"< 1 GiB: {'met' if gib < 1 else 'NOT met'}")
             for name, gib in peaks.items()]  # fmt: skip
    rss, heap = m["executor's JVM, peak GiB"], m["executor's heap"]
    executor = Figure(
        "executor's JVM, peak resident",
        None,
        f"{rss:.2f} GiB (heap -Xmx{heap}; RocksDB, metaspace and code outside it)",
        "runs at Spark's default heap (1 GiB)",
    )
    split = m["executor's memory at the end, GiB"]
    parts = []
    if split:
        said = (
            f"{split['resident']:.2f} GiB: heap {split['heap']:.2f}, the JVM's own beside it "
            f"{split['jvm']:.2f} (metaspace, direct buffers, collector, compiled code), outside "
            f"the JVM's accounting {split['outside']:.2f} (RocksDB's cache and write buffers, "
            "the allocator)"
        )
        parts.append(Figure("executor's JVM at the end, resident", None, said, ""))
    costs = ", ".join(f"{c:.1f}" for c in m["file costs s"])
    return [
        Figure(
            f"state on the executors / batch replay, {m['window']}",
            m["executors / batch"],
            f"batch {m['batch s']:.1f} s, executors {m['executors s']:.1f} s "
            f"({m['sends a second']:,.0f} sends/s); per file: {costs} s",
            "",
        ),
        Figure(
            "late files / early files",
            m["late files / early files"],
            "the last three against the second to the fourth",
            "<= 1.5x",
        ),
        Figure("state store on disk", None, f"{m['state store on disk GB']:.2f} GB", ""),
        *under,
        executor,
        *parts,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=6_000_000)
    parser.add_argument("--files", type=int, default=6, help="files landed (default 6)")
    parser.add_argument("--window", default="P7D")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    add_option(parser)
    args = parser.parse_args(argv)
    with running(FOLDER / "cluster") as cluster:
        figures = measure(args.rows, args.files, args.window, cluster.master)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    record(
        "make bench-watch-cluster",
        f"{short_count(args.rows)} sends, {args.window}",
        _figures(figures),
        baseline="the batch replay of the same files on the same application",
        enabled=not args.no_record,
    )
    return 0 if all(gib < 1 for gib in figures["peaks GiB"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
