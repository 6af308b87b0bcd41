"""The one place that starts Spark: :func:`get_spark`, a local session by default, Spark
Connect via ``SPARK_REMOTE``, with the settings a small machine needs
(docs/decisions/spark-settings.md), listening on this machine only unless told otherwise
(:func:`listening`). Starting one sets ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` in this
process's environment."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import TYPE_CHECKING

from dedup_lib.memory import driver_memory, result_size
from dedup_lib.spark.connect import _CONNECT_MODE, _local_connect, client_settings, is_connect
from dedup_lib.spark.java import check_java, class_data_options
from dedup_lib.spark.jvm_options import quoted_option, with_java_options
from dedup_lib.spark.logs import _log_settings, _prepare_log, output_to, spark_log_path

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession


#: Settings for a small machine: few shuffle partitions, UTC, quiet console, Arrow on.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Below Int.MaxValue, Spark 4 measures the Arrow batch after every row it adds, a cost
    # the replay pass feels (docs/decisions/spark-settings.md). Batches stay bounded by
    # maxRecordsPerBatch (10,000 rows).
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    "spark.ui.showConsoleProgress": "false",
    # On, PySpark records the Python call site of every column function and DataFrame method
    # it is handed, with a lookup of the active session and its settings each time: 4 to 5
    # round trips to the JVM per F.col, which dominate planning a small or wide input
    # (docs/decisions/spark-settings.md). What is lost: the "DataFrame"
    # call-site section of Spark's runtime errors, which the library's own messages replace.
    # A static setting: a session already running, or a remote server, keeps its own.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.log.level": "WARN",
    # What Spark's status store keeps of finished work, the UI on or off: by default the last
    # 1,000 SQL queries with their plans, 1,000 jobs and stages, 100,000 tasks. The live
    # monitor runs a query every few seconds for weeks, and its JVM's heap grew with them
    # until the limits (issue 70); the UI lists the latest 100.
    "spark.sql.ui.retainedExecutions": "100",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
    # Each read lists its files into a cache shared by the session (250 MB), under a key of
    # that read's own: no later read finds them, and they stayed until the cache was full, a
    # file status or two for each micro-batch of a monitor (issue 70). Gone after 5 minutes.
    "spark.sql.metadataCacheTTLSeconds": "300",
    "spark.driver.memory": driver_memory(),
    "spark.driver.maxResultSize": result_size(driver_memory()),
}


#: How a local driver JVM started here runs. The throughput collector, and the optimising
#: compiler (C2) kept for code run ten times as often as by default: a notebook's first Spark
#: jobs are mostly one-off planning and generated code, which C2 compiled at a cost it never
#: earned back on 2 cores; C1 alone runs large inputs at half speed
#: (docs/decisions/spark-settings.md). A collector named in the user's own options wins.
JVM_TUNING = (
    "-XX:+UseParallelGC",
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=6000",
    "-XX:Tier4CompileThreshold=50000",
    "-XX:Tier4BackEdgeThreshold=400000",
)


_COLLECTOR = re.compile(r"-XX:\+Use\w*GC\b")


#: Set on the session even when it was already running: the results or the speed depend on them.
SESSION_SETTINGS = (
    "spark.sql.session.timeZone",
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.sql.execution.arrow.maxBytesPerBatch",
)


def _tuned(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with :data:`JVM_TUNING`, its collector left out when the user's options
    (Spark's or the ``java`` launcher's environment) name one: two would stop the JVM."""
    theirs = " ".join(
        [settings.get("spark.driver.extraJavaOptions", "")]
        + [os.environ.get(name, "") for name in ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")]
    )
    named = _COLLECTOR.search(theirs) is not None
    return with_java_options(settings, [o for o in JVM_TUNING if not (named and "GC" in o)])


#: Where a JVM started here listens unless told otherwise: this machine only.
LOOPBACK = "127.0.0.1"

_ADDRESS = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:\[\]/]+)(?::(?P<port>\d{1,5}))?")


def ui_address(text: str) -> tuple[str, int | None]:
    """``HOST``, ``HOST:PORT`` or ``[IPv6]:PORT`` as the host and port of Spark's UI (no
    port: Spark's own, 4040 or the next free one; port 0: any free one).

    Raises
    ------
    ValueError
        Not an address of that form, or a port above 65535.
    """
    found = _ADDRESS.fullmatch(text.strip())
    port = None if found is None or found["port"] is None else int(found["port"])
    if found is None or (port is not None and port > 65535):
        raise ValueError(f"expected HOST:PORT such as 127.0.0.1:4040, got {text!r}")
    return found["host"].strip("[]"), port


def listening(driver_host: str | None, ui: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """Where a driver JVM started here listens: its settings, and the variables set in its
    environment while it starts. Spark binds its driver and block manager to
    ``spark.driver.host`` (``spark.driver.bindAddress`` falls back to it), whose default is
    ``SPARK_LOCAL_HOSTNAME``, else the name of ``SPARK_LOCAL_IP``, else of a network
    interface's address (even when the host name resolves to loopback); and its UI to
    ``SPARK_LOCAL_IP``, else every interface, IPv4 and IPv6: no setting moves it.

    Parameters
    ----------
    driver_host : str or None
        The address executors reach the driver at (``spark.driver.host``), for a cluster whose
        executors run on other hosts. None: ``$DEDUP_SPARK_DRIVER_HOST``, else
        :data:`LOOPBACK`, unless the environment has ``SPARK_LOCAL_IP`` or
        ``SPARK_LOCAL_HOSTNAME`` or Spark's settings name ``spark.driver.host``.
    ui : str or None
        Where Spark's UI listens: ``HOST:PORT`` (:func:`ui_address`), or ``"off"`` for no UI.
        None: ``$DEDUP_SPARK_UI``, else :data:`LOOPBACK` on Spark's port, unless the
        environment has ``SPARK_LOCAL_IP``.

    Returns
    -------
    tuple[dict[str, str], dict[str, str]]
        The settings and the environment variables.
    """
    driver_host = driver_host or os.environ.get("DEDUP_SPARK_DRIVER_HOST") or None
    ui = ui or os.environ.get("DEDUP_SPARK_UI") or None
    settings: dict[str, str] = {}
    env: dict[str, str] = {}
    if driver_host is not None:
        settings["spark.driver.host"] = driver_host
    elif not {"SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME"} & os.environ.keys():
        env["SPARK_LOCAL_HOSTNAME"] = LOOPBACK
    if ui is not None and ui.strip().lower() == "off":
        settings["spark.ui.enabled"] = "false"
    elif ui is not None:
        host, port = ui_address(ui)
        settings["spark.ui.enabled"] = "true"
        env["SPARK_LOCAL_IP"] = host
        if port is not None:
            settings["spark.ui.port"] = str(port)
    elif "SPARK_LOCAL_IP" not in os.environ:
        env["SPARK_LOCAL_IP"] = LOOPBACK
    return settings, env


@contextlib.contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """``variables`` in this process's environment within, for a JVM started there (PySpark
    passes it whole); as they were after."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


def get_spark(
    app_name: str = "dedup-lib",
    *,
    remote: str | None = None,
    master: str | None = None,
    config: dict[str, str] | None = None,
    driver_host: str | None = None,
    ui: str | None = None,
) -> SparkSession:
    """Return a ready SparkSession, reusing the active one.

    A JVM started here logs to :func:`spark_log_path` only, starts from a class-data
    archive (:mod:`dedup_lib.class_data`) that the first one writes when it exits, and listens
    on 127.0.0.1 only (its driver, block manager and UI, and a local Connect server) unless
    ``driver_host``, ``ui`` or the environment say otherwise (:func:`listening`).

    Parameters
    ----------
    app_name : str, default "dedup-lib"
        The application's name in Spark's UI.
    remote : str, optional
        Spark Connect: ``sc://host:15002`` for a server, or ``local[2]`` for a local
        Connect server started here. Default: the ``SPARK_REMOTE`` environment variable;
        unset, a classic session.
    master : str, optional
        A classic session's master, default ``local[*]`` (all cores).
    config : dict[str, str], optional
        Settings over :data:`LOCAL_DEFAULTS`; a running Connect server ignores static ones.
    driver_host : str, optional
        The address a cluster's executors reach the driver at, which it listens on
        (``spark.driver.host``). Default: ``$DEDUP_SPARK_DRIVER_HOST``, else 127.0.0.1.
    ui : str, optional
        Where Spark's UI listens, ``HOST:PORT``, or ``"off"``. Default: ``$DEDUP_SPARK_UI``,
        else 127.0.0.1 on Spark's port (4040, or the next one free).

    Returns
    -------
    SparkSession
        The active session if there is one, else a new one.

    Raises
    ------
    ToolMissingError
        A local session without Java 17 or later: the message says what to install.

    Examples
    --------
    >>> from dedup_lib import get_spark
    >>> spark = get_spark()
    >>> spark.conf.get("spark.sql.session.timeZone")
    'UTC'
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    remote = remote or os.environ.get("SPARK_REMOTE") or None
    if remote is None and SparkSession.getActiveSession() is None:
        # A local Spark Connect server started by a parent process (a test run, a notebook
        # server) leaves these set for its children; they would turn this classic session
        # into a Connect one without a URL (CONNECT_URL_NOT_SET).
        for name in _CONNECT_MODE:
            os.environ.pop(name, None)
    local = remote is None or not remote.startswith("sc://")
    new_jvm = local and not _jvm_running()
    # Asked of `java -version` only before a JVM starts: one that runs has Java, and the
    # question costs a process on every call (30 s on a machine at load 55).
    java = check_java() if new_jvm else None
    log = spark_log_path()
    ours, variables = listening(driver_host, ui) if new_jvm else ({}, {})
    settings = {**LOCAL_DEFAULTS, **ours, **(config or {})}
    starts_jvm = _prepare_log(log) and new_jvm
    if starts_jvm:
        settings = _tuned(_log_settings(log, settings))
        if java is not None:
            archive = class_data_options(java)
            settings = with_java_options(settings, [quoted_option(o) for o in archive])

    with output_to(log) if starts_jvm else contextlib.nullcontext(), _environment(variables):
        if remote is not None and local:
            spark = _local_connect(app_name, remote, settings)
        else:
            builder = SparkSession.builder.appName(app_name)
            if remote is not None:
                builder = builder.remote(remote)
            else:
                builder = builder.master(master or os.environ.get("DEDUP_SPARK_MASTER", "local[*]"))
            # A remote Connect server (sc://) is already running: it takes SQL settings only.
            for key, value in (settings if local else client_settings(settings)).items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
    for key in SESSION_SETTINGS:
        spark.conf.set(key, settings[key])
    return spark


_LOCAL_MASTER = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")


def local_cores(spark: SparkSession) -> int | None:
    """The cores a local master runs tasks on (``local``, ``local[4]``, ``local[*]``), or None
    for a cluster's master and a Connect session, whose size this process cannot see."""
    if is_connect(spark):
        return None
    found = _LOCAL_MASTER.fullmatch(spark.conf.get("spark.master", "") or "")
    if found is None:
        return None
    cores = found.group(1)
    if cores is None:
        return 1
    return (os.cpu_count() or 1) if cores == "*" else int(cores)
