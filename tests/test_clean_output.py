"""No Spark or Java log text where a user reads: a notebook's outputs here, the command line's
output in ``test_wheel.py`` (the installed ``dedup-lib postmortem``, quiet, prints the
report's path alone). Spark's log (log4j, the JVM's own warnings, py4j, the Python warnings of
pyspark and pandas) belongs in :func:`dedup_lib.spark.spark_log_path` only."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

import dedup_lib
from lab_kit import LOG_TEXT

pytestmark = pytest.mark.spark

SRC = str(Path(dedup_lib.__file__).resolve().parents[1])

#: A notebook's first cells as a user writes them: start Spark, load, show rows, aggregate;
#: the last cell waits, so output the JVM writes late still lands in a cell.
CELLS = [
    "from dedup_lib import get_spark, load_telemetry, sample_path\n"
    "spark = get_spark(config={'spark.driver.memory': '1g', 'spark.ui.enabled': 'false'})",
    "loaded = load_telemetry(spark, sample_path('incident.parquet'))\n"
    "loaded.valid.limit(5).toPandas()",
    "loaded.valid.groupBy('entity').count().toPandas()",
    "import time\ntime.sleep(3)",
]


def _leaks(texts: list[str]) -> list[str]:
    return [text for text in texts if LOG_TEXT.search(text)]


def test_a_notebook_on_a_local_connect_server_has_no_stderr_output(monkeypatch, tmp_path):
    """On Spark Connect: a kernel that starts its own local Connect server. The same on a
    classic session is checked on every notebook on each of the analysts' inputs
    (``test_user_data.py``) and in JupyterLab (``tests/browser``)."""
    # the kernel inherits this environment: the dedup_lib under test, a log of its own, and
    # for the Connect pass a local Connect server started by get_spark
    monkeypatch.setenv("PYTHONPATH", SRC)
    monkeypatch.setenv("DEDUP_LOG_DIR", str(tmp_path / "log"))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    # get_spark starts the kernel's local Connect server on a free port.
    monkeypatch.setenv("SPARK_REMOTE", os.environ.get("SPARK_REMOTE", "local[2]"))
    notebook = new_notebook(cells=[new_code_cell(source) for source in CELLS])
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=600,
        startup_timeout=120,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    nbformat.validate(notebook)
    stderr = [
        "".join(output.get("text", ""))
        for cell in notebook.cells
        for output in cell.outputs
        if output.get("name") == "stderr"
    ]
    assert stderr == [], f"stderr in a notebook: {stderr}"
    shown = [
        str(value)
        for cell in notebook.cells
        for output in cell.outputs
        for value in [output.get("text", ""), *output.get("data", {}).values()]
    ]
    assert _leaks(shown) == []
    # the log got what the notebook did not: proof the JVM started and logged
    assert (tmp_path / "log" / "spark.log").is_file()
