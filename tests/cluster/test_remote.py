"""The workbench on a real cluster: ``dedup-lib simulate`` and a notebook against a Spark
Connect server whose work runs on a standalone master and worker (:mod:`cluster_kit`), with
the verdicts of a local classic run: the command line's with the Python replay kernel, the
notebook's with the JVM one, so that each kernel runs on the cluster once (the command line's
kernel option reaches the same call, checked locally in ``tests/cli``).

The input is named as a user in the checkout names it, relative
(``data/samples/incident.parquet``): the client sends it absolute, the cluster reads it. Its
entities partitioned, its 29,872 sends get all three verdicts (payments' batches span partition
keys, and are rejected); the day sample, seven times its size, proves no more here. The
cluster's Python has no dedup_lib: the Python kernel travels by value, the JVM one as an
artifact. The notebook also builds the explorer's cache there, through its Spark passes:
only the sends of repeated keys reach the driver, and its verdicts are the engine's. Nothing
else runs while the cluster does: the local run comes first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from cluster_kit import (
    FOLDER,
    INPUT,
    ROOT,
    VERDICT_COLUMNS,
    Cluster,
    client_environment,
    simulate,
    verdicts_of,
)

pytestmark = pytest.mark.cluster

#: The verdicts' columns compared.
VERDICT = list(VERDICT_COLUMNS)


def test_simulate_on_the_cluster_gives_the_local_verdicts(
    local: tuple[str, pd.DataFrame], cluster: Cluster
) -> None:
    report, verdicts = local
    out = "build/cluster/simulate/verdicts.parquet"
    target = ROOT / out
    run = simulate(out, "python", cluster.remote)
    assert f"wrote verdicts to {target} (written by the cluster" in run.stderr
    assert run.stdout == report
    assert set(verdicts["verdict"]) == {"accepted", "duplicate", "rejected"}
    pd.testing.assert_frame_equal(verdicts_of(target), verdicts)


def test_a_path_the_cluster_lacks_is_one_line_naming_it(cluster: Cluster) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "dedup_lib", "simulate", "no/such/day.parquet", "-q"],
        cwd=ROOT,
        env=client_environment(cluster.remote),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("dedup-lib simulate: error: load_telemetry: no/such/day.parquet")
    assert "the cluster, which resolved it on its own file system" in lines[0]
    assert "abfss://<container>@<account>.dfs.core.windows.net/<path>" in lines[0]


#: A notebook as a user on a cluster writes it: the relative path, the JVM kernel, and what the
#: session and the executors' Python are.
CELLS = [
    "import importlib.util, json\n"
    "from pyspark.sql import functions as F\n"
    "from dedup_lib import DedupPolicy, detect_duplicates, get_spark, load_telemetry\n"
    "from dedup_lib.spark import is_connect\n"
    "spark = get_spark()",
    "def executors_have_dedup_lib(_):\n"
    "    import importlib.util\n"
    "    return importlib.util.find_spec('dedup_lib') is not None\n"
    "found = spark.range(2).select(F.udf(executors_have_dedup_lib, 'boolean')('id')).collect()\n"
    "print(json.dumps({'connect': is_connect(spark), 'master': spark.conf.get('spark.master'),\n"
    "                  'executors_have_dedup_lib': any(r[0] for r in found)}))",
    f"loaded = load_telemetry(spark, {INPUT!r})\n"
    "policy = DedupPolicy('PT10M', partitioning=True)\n"
    "result = detect_duplicates(loaded.valid, policy, kernel='jvm')\n"
    "verdicts = result.select(*VERDICT).toPandas()\n"
    "verdicts.attrs.clear()  # Connect's plan metrics, which Parquet cannot keep\n"
    "verdicts.to_parquet('build/cluster/notebook-jvm.parquet')",
    # The explorer's build as on an input over a million sends: its Spark passes, then only
    # the sends of repeated keys and the counts brought to the driver.
    "import dedup_lib.sweep.collect, pandas as pd\n"
    "from dedup_lib import ReplayCache, summarize\n"
    "dedup_lib.sweep.collect.LOCAL_ROWS = 0\n"
    "cache = ReplayCache.build(loaded.valid)\n"
    "engine = summarize(detect_duplicates(loaded.valid, DedupPolicy('PT10M')))\n"
    "pd.testing.assert_frame_equal(cache.summarize('PT10M'), engine)\n"
    "ids = F.col('message_id').isNotNull() & (F.col('message_id') != '')\n"
    "keys = loaded.valid.where(ids).groupBy('entity', 'message_id').count().where('count > 1')\n"
    "print(json.dumps({'repeated': len(cache.repeated), 'sends': loaded.valid.count(),\n"
    "                  'in_repeated_keys': keys.agg(F.sum('count')).first()[0]}))",
]


def test_a_notebook_on_the_cluster_gives_the_local_verdicts(
    local: tuple[str, pd.DataFrame], cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, verdicts = local
    for name in [k for k in os.environ if k.startswith(("SPARK_", "PYSPARK_"))]:
        monkeypatch.delenv(name)
    for name, value in client_environment(cluster.remote).items():
        monkeypatch.setenv(name, value)
    cells = [f"VERDICT = {VERDICT!r}", *CELLS]
    notebook = new_notebook(cells=[new_code_cell(source) for source in cells])
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=900,
        startup_timeout=120,
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute()
    nbformat.validate(notebook)
    assert _printed(notebook.cells[2]) == {
        "connect": True,
        "master": cluster.master,
        "executors_have_dedup_lib": False,
    }
    pd.testing.assert_frame_equal(verdicts_of(FOLDER / "notebook-jvm.parquet"), verdicts)
    built = _printed(notebook.cells[-1])
    assert built["repeated"] == built["in_repeated_keys"] > 0
    assert built["repeated"] < built["sends"] == len(verdicts)


def _printed(cell: Any) -> Any:
    """The JSON a notebook cell printed."""
    return json.loads("".join(o["text"] for o in cell.outputs if o.get("name") == "stdout"))
