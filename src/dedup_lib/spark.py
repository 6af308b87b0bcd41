"""One place that starts Spark: a local session by default, Spark Connect via ``SPARK_REMOTE``.

Everything else in ``dedup_lib`` takes a ``SparkSession`` and uses only the DataFrame API,
so the same code runs on a classic local session and on a Spark Connect server.

Spark's own log (log4j, the JVM's warnings, py4j's) goes to :func:`spark_log_path`, never to
the terminal, a notebook cell or a report: the user sees the library's one-line errors, and
the file keeps Spark's traces for whoever needs them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import warnings
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dedup_lib.class_data import archive_options
from dedup_lib.errors import ToolMissingError
from dedup_lib.memory import driver_memory, result_size

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pandas as pd
    from pyspark.sql import Column, DataFrame, SparkSession

MIN_JAVA = 17

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


#: What PySpark sets in a process that runs its local Connect server: they make the DataFrame
#: API build Connect plans, and stopping the Connect session stops the host too.
_CONNECT_MODE = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")

#: Spark's log is started afresh past this size; the previous one is kept as ``spark.log.1``.
LOG_ROLL_BYTES = 20 * 1024 * 1024

#: How Python's lines in Spark's log look (py4j's, pyspark's, the command line's).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The log4j2 configuration a JVM started by :func:`get_spark` reads: everything to the log file.
LOG4J2_PROPERTIES = files("dedup_lib") / "resources" / "log4j2.properties"


def cache_dir() -> Path:
    """The library's own folder for what it builds and logs: ``DEDUP_LIB_CACHE``, else
    ``dedup_lib`` in the user's cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    explicit = os.environ.get("DEDUP_LIB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dedup_lib"


def spark_log_path() -> Path:
    """Where Spark's log goes: ``$DEDUP_LOG_DIR/spark.log``, else ``spark.log`` in
    :func:`cache_dir`, beside the compiled replay kernel."""
    folder = os.environ.get("DEDUP_LOG_DIR")
    return (Path(folder).expanduser() if folder else cache_dir()) / "spark.log"


def _java_option(name: str, value: str) -> str:
    """``-Dname=value`` quoted for spark-submit's option parser, so a path with spaces or
    backslashes stays one option."""
    return _quoted(f"-D{name}={value}")


def _quoted(option: str) -> str:
    escaped = option.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _log_settings(log: Path, settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with the driver JVM's options extended to log to ``log`` only."""
    config = Path(str(LOG4J2_PROPERTIES))
    return _with_java_options(
        settings,
        [
            _java_option("log4j2.configurationFile", str(config)),
            _java_option("dedup.spark.log", str(log)),
        ],
    )


def _tuned(settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with :data:`JVM_TUNING`, its collector left out when the user's options
    (Spark's or the ``java`` launcher's environment) name one: two would stop the JVM."""
    theirs = " ".join(
        [settings.get("spark.driver.extraJavaOptions", "")]
        + [os.environ.get(name, "") for name in ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS")]
    )
    named = _COLLECTOR.search(theirs) is not None
    return _with_java_options(settings, [o for o in JVM_TUNING if not (named and "GC" in o)])


def _with_java_options(settings: dict[str, str], options: list[str]) -> dict[str, str]:
    theirs = settings.get("spark.driver.extraJavaOptions", "")
    ours = " ".join(options)
    return {**settings, "spark.driver.extraJavaOptions": f"{theirs} {ours}".strip()}


def log_handler(log: Path | None = None) -> logging.Handler:
    """A logging handler that appends Python's records to Spark's log, in :data:`LOG_FORMAT`
    (opened on the first record, so an idle handler creates no file)."""
    handler = logging.FileHandler(log or spark_log_path(), delay=True, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler


def log_error(title: str, details: str) -> None:
    """Append an error, one ``ERROR`` line then its details (a traceback), to Spark's log:
    the place a one-line error sends whoever needs more. Nothing when it cannot be written."""
    log = spark_log_path()
    stamp = dt.datetime.now(dt.UTC).strftime("%y/%m/%d %H:%M:%S")
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{stamp} ERROR {title}\n{details.rstrip(chr(10))}\n")
    except OSError:
        pass


def _prepare_log(log: Path) -> bool:
    """Create the log's folder, start a fresh log past :data:`LOG_ROLL_BYTES`, and send
    py4j's and pyspark's Python loggers there too (without a handler, Python prints their
    warnings on stderr). False when the folder cannot be made: Spark then logs as it would."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_ROLL_BYTES:
            log.replace(log.with_name(log.name + ".1"))
    for name in ("py4j", "pyspark"):
        logger = logging.getLogger(name)
        if not any(getattr(h, "dedup_spark_log", False) for h in logger.handlers):
            handler = log_handler(log)
            handler.dedup_spark_log = True  # type: ignore[attr-defined]
            logger.addHandler(handler)
    return True


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[None]:
    """File descriptors 1 and 2 point at ``log`` for the ``with`` block, so a process started
    there writes to ``log`` for its whole life: the JVM what it prints outside log4j (its own
    warnings, "Using incubator modules", Python workers' stderr), which ipykernel would
    forward into a notebook cell; a Jupyter kernel its own warnings."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
    except (OSError, ValueError):
        yield
        return
    try:
        with open(log, "ab") as target:
            os.dup2(target.fileno(), 1)
            os.dup2(target.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _jvm_running() -> bool:
    from pyspark import SparkContext

    return SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ


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


def class_data_options(java_version: int) -> list[str]:
    """The options that start a local JVM of this machine's Java from its class-data archive
    in :func:`cache_dir` (:func:`~dedup_lib.class_data.archive_options`); none without Java."""
    java = java_tool("java")
    return archive_options(cache_dir() / "jvm", java, java_version) if java else []


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

    A JVM started here logs to :func:`spark_log_path` only, and starts from a class-data
    archive (:mod:`dedup_lib.class_data`) that the first one writes when it exits.

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
    settings = {**LOCAL_DEFAULTS, **(config or {})}
    local = remote is None or not remote.startswith("sc://")
    java = check_java() if local else None
    log = spark_log_path()
    starts_jvm = _prepare_log(log) and local and not _jvm_running()
    if starts_jvm:
        settings = _tuned(_log_settings(log, settings))
        if java is not None:
            archive = class_data_options(java)
            settings = _with_java_options(settings, [_quoted(o) for o in archive])

    with output_to(log) if starts_jvm else contextlib.nullcontext():
        if remote is not None and local:
            spark = _local_connect(app_name, remote, settings)
        else:
            builder = SparkSession.builder.appName(app_name)
            if remote is not None:
                builder = builder.remote(remote)
            else:
                builder = builder.master(master or os.environ.get("DEDUP_SPARK_MASTER", "local[*]"))
            # A remote Connect server (sc://) is already running: it takes SQL settings only.
            for key, value in settings.items():
                if local or key.startswith("spark.sql."):
                    builder = builder.config(key, value)
            spark = builder.getOrCreate()
    for key in SESSION_SETTINGS:
        spark.conf.set(key, settings[key])
    return spark


#: What PySpark's own local Connect mode sets on the session that hosts the server.
_CONNECT_SERVER = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.sql.artifact.isolation.enabled": "true",
    "spark.sql.artifact.isolation.alwaysApplyClassloader": "true",
}


#: Where :func:`free_port` looks: below the ports the system hands to whoever binds port 0.
_PORTS_FROM = 20_000


def free_port() -> int:
    """A TCP port no one listens on now, for a server started a little later.

    Not one the system would choose for port 0 (Linux: 32768 to 60999): in the seconds before
    the server binds it, another process, or the server's own JVM opening its driver and
    block-manager ports, may be handed that one, and a Connect server then fails to bind while
    whoever took the port answers its clients (docs/decisions/spark-settings.md)."""
    below = _first_ephemeral_port()
    if below > _PORTS_FROM + 1000:
        for _ in range(50):
            port = _PORTS_FROM + secrets.randbelow(below - _PORTS_FROM)
            with socket.socket() as probe, contextlib.suppress(OSError):
                probe.bind(("", port))
                return port
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _first_ephemeral_port() -> int:
    """Where the range the system picks ports for port 0 from begins (Linux's default
    elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _local_connect(app_name: str, master: str, settings: dict[str, str]) -> SparkSession:
    """A Spark Connect server in this process on a free port, and a session of it.

    PySpark's ``remote("local[...]")`` always serves on port 15002, so it failed beside any
    other Connect server on the machine (a cluster's, another notebook's). The server runs
    in a local session started with ``settings``, as PySpark's does, and needs the token that
    this process and its children have in ``SPARK_CONNECT_AUTHENTICATE_TOKEN``.
    """
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    builder = ConnectSession.builder
    if ConnectSession.getActiveSession() is None:
        port = free_port()
        os.environ.setdefault("SPARK_CONNECT_AUTHENTICATE_TOKEN", secrets.token_hex(16))
        # Inherited from a parent's Connect run, these would make the host a Connect client.
        for name in _CONNECT_MODE:
            os.environ.pop(name, None)
        given = os.environ.pop("SPARK_REMOTE", None)
        try:
            host = SparkSession.builder.appName(app_name).master(master)
            server = {**_CONNECT_SERVER, "spark.connect.grpc.binding.port": str(port)}
            for key, value in {**settings, **server}.items():
                host = host.config(key, value)
            host.getOrCreate()
        finally:
            if given is not None:
                os.environ["SPARK_REMOTE"] = given
        os.environ.update(dict.fromkeys(_CONNECT_MODE, "1"))
        builder = builder.remote(f"sc://localhost:{port}")
    for key, value in settings.items():
        if key.startswith("spark.sql."):
            builder = builder.config(key, value)
    with warnings.catch_warnings():
        # The client sets the host's settings again, and warns for each static one.
        warnings.filterwarnings("ignore", message="Failed to set .*CANNOT_MODIFY_CONFIG")
        return cast("SparkSession", builder.getOrCreate())


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exceptions Spark raises (classic and Connect); py4j is imported only when present,
    as a Connect-only install has none."""
    from pyspark.errors import PySparkException

    found: list[type[BaseException]] = [PySparkException]
    try:
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        found.append(Py4JError)
    return tuple(found)


def spark_message(exc: BaseException | str) -> str:
    """The first meaningful line of a Spark error (or of its text), without the Py4J and Java
    class prefixes."""
    for line in str(exc).splitlines():
        line = line.strip().removeprefix(": ")
        if line and not line.startswith("An error occurred while calling"):
            line = re.sub(r"^[\w.$]+(Exception|Error): ", "", line)
            return re.sub(r"^\[[A-Z_.]+\]\s*|\s*SQLSTATE: \w+\.?$", "", line)
    return "Spark error" if isinstance(exc, str) else type(exc).__name__


def to_pandas(df: DataFrame) -> pd.DataFrame:
    """``df.toPandas()`` without what a Spark Connect client leaves in ``attrs`` (the plan's
    metrics, as objects): pandas writes ``attrs`` into a Parquet file's metadata as JSON, so
    ``to_parquet`` of a table returned under Connect failed."""
    table = df.toPandas()
    table.attrs.clear()
    return table


def hashed(df: DataFrame, *by: Column | str) -> DataFrame:
    """``df`` hashed by ``by`` into the session's shuffle partitions: before counting by a key
    that nearly every row has to itself (a message, an id), where Spark's partial
    aggregation within each input partition merges almost nothing and costs up to half the
    pass. The number is given, so adaptive execution does not merge the partitions into fewer
    than there are cores."""
    partitions = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 200)
    return df.repartition(partitions, *by)


def is_connect(spark: SparkSession) -> bool:
    """True when ``spark`` is a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


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
