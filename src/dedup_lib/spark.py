"""One place that starts Spark: a local session by default, Spark Connect via ``SPARK_REMOTE``.

Everything else in ``dedup_lib`` takes a ``SparkSession`` and uses only the DataFrame API,
so the same code runs on a classic local session and on a Spark Connect server.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dedup_lib.errors import ToolMissingError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MIN_JAVA = 17

#: Settings for a small machine: few shuffle partitions, UTC, quiet console, Arrow on.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Below Int.MaxValue, Spark 4 measures the Arrow batch after every row it adds: that alone
    # cost the engine's replay pass 0.5x the shuffle-and-sort floor. Batches stay bounded by
    # maxRecordsPerBatch (10,000 rows).
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    "spark.driver.memory": os.environ.get("DEDUP_DRIVER_MEMORY", "4g"),
}


#: Set on the session even when it was already running: the results or the speed depend on them.
SESSION_SETTINGS = (
    "spark.sql.session.timeZone",
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.sql.execution.arrow.maxBytesPerBatch",
)


class JavaNotFoundError(ToolMissingError):
    """Raised when no Java 17+ runtime is available for a local Spark session."""


def java_tool(name: str) -> str | None:
    """The path of a JDK tool (``java``, ``javac``): from ``JAVA_HOME`` first, as Spark does,
    else from PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / name
        if candidate.exists():
            return str(candidate)
    return shutil.which(name)


def java_version(java: str | None = None) -> int | None:
    """The major version of the Java runtime that Spark would start, or None if there is none."""
    java = java or java_tool("java")
    if java is None:
        return None
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java() -> int:
    """Fail early, with what to do, when Java 17+ is missing (PySpark 4 needs it)."""
    java = java_tool("java")
    version = java_version(java)
    install = (
        "Install a Java 17+ runtime (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`; "
        "macOS: `brew install openjdk@17`; conda: `conda install -c conda-forge openjdk=17`) "
        "and put it on PATH or set JAVA_HOME. To use a remote Spark Connect server instead, "
        "set SPARK_REMOTE=sc://host:15002."
    )
    if version is None:
        where = f"`{java}` did not report a version" if java else "no `java` on PATH or JAVA_HOME"
        raise JavaNotFoundError(
            f"dedup_lib needs Java {MIN_JAVA}+ for local Spark: {where}. {install}"
        )
    if version < MIN_JAVA:
        raise JavaNotFoundError(
            f"dedup_lib needs Java {MIN_JAVA}+ for local Spark, but `{java}` is Java {version}. "
            + install
        )
    return version


def get_spark(
    app_name: str = "dedup-lib",
    *,
    remote: str | None = None,
    master: str | None = None,
    config: dict[str, str] | None = None,
) -> SparkSession:
    """Return a ready SparkSession, reusing the active one.

    ``remote`` (or the ``SPARK_REMOTE`` environment variable) selects Spark Connect, for example
    ``sc://host:15002`` for a cluster or ``local[2]`` for a local Connect server. Otherwise a
    classic local session on all cores (``master``, default ``local[*]``) is started. ``config``
    overrides :data:`LOCAL_DEFAULTS`; static settings are ignored by a running Connect server.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    remote = remote or os.environ.get("SPARK_REMOTE") or None
    if remote is None and SparkSession.getActiveSession() is None:
        # A local Spark Connect server started by a parent process (a test run, a notebook
        # server) leaves these set for its children; they would turn this classic session
        # into a Connect one without a URL (CONNECT_URL_NOT_SET).
        for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
            os.environ.pop(name, None)
    settings = {**LOCAL_DEFAULTS, **(config or {})}
    if remote is None or not remote.startswith("sc://"):
        check_java()

    builder = SparkSession.builder.appName(app_name)
    if remote is not None:
        builder = builder.remote(remote)
    else:
        builder = builder.master(master or os.environ.get("DEDUP_SPARK_MASTER", "local[*]"))
    for key, value in settings.items():
        # A remote Connect server (sc://) is already running: it takes SQL settings only. A
        # local one (local[...]) is started with all of them.
        if remote is None or not remote.startswith("sc://") or key.startswith("spark.sql."):
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key in SESSION_SETTINGS:
        spark.conf.set(key, settings[key])
    return spark


def is_connect(spark: SparkSession) -> bool:
    """True when ``spark`` is a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
