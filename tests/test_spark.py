"""get_spark's Java check: a clear message where Java 17+ is missing."""

from __future__ import annotations

import os

import pytest

from dedup_lib.spark import JavaNotFoundError, check_java, java_version
from fakes import fake_java


@pytest.mark.parametrize(
    ("banner", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "11.0.2" 2019-01-15', 11),
    ],
)
def test_java_version_reads_the_banner(tmp_path, banner, major):
    assert java_version(str(fake_java(tmp_path, banner) / "bin" / "java")) == major


def test_old_java_is_refused_with_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "11.0.2"')))
    with pytest.raises(JavaNotFoundError, match=r"needs Java 17\+.*is Java 11.*openjdk"):
        check_java()


def test_missing_java_is_refused_with_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match=r"no `java` on PATH or JAVA_HOME.*SPARK_REMOTE"):
        check_java()


def test_this_machine_has_java_17_or_newer():
    assert check_java() >= 17, os.environ.get("JAVA_HOME")


@pytest.mark.spark  # starts Spark in a child process
def test_a_child_of_a_local_connect_run_still_gets_classic_spark():
    """Kernels started by a test run that holds a local Connect server inherit its variables."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_LOCAL_REMOTE": "1"}
    env.pop("SPARK_REMOTE", None)
    code = (
        "from dedup_lib import get_spark\n"
        "from dedup_lib.spark import is_connect\n"
        "spark = get_spark(master='local[1]', config={'spark.ui.enabled': 'false'})\n"
        "print(is_connect(spark), spark.range(3).count())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "3"]


@pytest.mark.connect
def test_the_session_skips_the_per_row_arrow_batch_size_check(spark):
    """Below Int.MaxValue, Spark measures each Arrow batch after every row it adds: that made
    the replay pass cost 0.5x the shuffle-and-sort floor (benchmarks/bench_engine.py)."""
    from dedup_lib.spark import SESSION_SETTINGS

    assert "spark.sql.execution.arrow.maxBytesPerBatch" in SESSION_SETTINGS
    value = spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch")
    assert int(str(value).rstrip("b")) == 2**31 - 1


@pytest.mark.connect
def test_the_session_does_not_record_the_call_site_of_every_column(spark):
    """On, PySpark asks the JVM for the active session and a setting at every column function
    and DataFrame method: 4 to 5 round trips per ``F.col``, a quarter of a reconcile's time."""
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()


@pytest.mark.spark  # starts Spark in a child process
@pytest.mark.parametrize(
    ("name", "content"),
    [("bad.parquet", bytes(range(100))), ("sends.csv.gz", b"message_id,send_time\nnot gzip\n")],
)
def test_spark_logs_to_its_file_and_the_terminal_gets_one_line(tmp_path, name, content):
    """A corrupt input makes Spark log an executor's ERROR with its Java trace, and the JVM
    prints its own warnings: all of it goes to the log, the terminal gets our line."""
    import subprocess
    import sys

    data = tmp_path / name
    data.write_bytes(content)
    log_dir = tmp_path / "log"
    env = {**os.environ, "DEDUP_LOG_DIR": str(log_dir), "DEDUP_DRIVER_MEMORY": "1g"}
    env.pop("SPARK_REMOTE", None)
    argv = [sys.executable, "-m", "dedup_lib", "simulate", str(data), "--master", "local[1]"]
    out = subprocess.run(
        [*argv, "--quiet"], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 1
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr[-3000:]
    assert lines[0].startswith("dedup-lib simulate: error: load_telemetry: ")
    assert lines[0].endswith(f"(Spark's log: {log_dir / 'spark.log'})")
    for java in ("at org.apache", "ERROR", "WARN", "log4j", "Exception"):
        assert java not in out.stderr
    log = (log_dir / "spark.log").read_text()
    assert " ERROR " in log
    assert "\tat org.apache.spark" in log


def test_the_driver_jvm_is_told_where_to_log_and_keeps_its_own_options(tmp_path):
    from dedup_lib.spark.logs import LOG4J2_PROPERTIES, _log_settings

    log = tmp_path / "a folder" / "spark.log"
    settings = _log_settings(log, {"spark.driver.extraJavaOptions": "-Xss4m"})
    options = settings["spark.driver.extraJavaOptions"]
    assert options.startswith("-Xss4m ")
    assert f'"-Ddedup.spark.log={log}"' in options
    assert f'"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES}"' in options
    assert "appender.file.fileName = ${sys:dedup.spark.log}" in LOG4J2_PROPERTIES.read_text()


def test_the_driver_jvm_is_tuned_unless_the_user_chose_a_collector(monkeypatch):
    from dedup_lib.spark.session import JVM_TUNING, _tuned

    for name in ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS"):
        monkeypatch.delenv(name, raising=False)
    options = _tuned({"spark.driver.extraJavaOptions": "-Xss4m"})["spark.driver.extraJavaOptions"]
    assert options == "-Xss4m " + " ".join(JVM_TUNING)

    chosen = _tuned({"spark.driver.extraJavaOptions": "-XX:+UseG1GC"})
    assert "ParallelGC" not in chosen["spark.driver.extraJavaOptions"]
    assert "-XX:Tier4InvocationThreshold=50000" in chosen["spark.driver.extraJavaOptions"]

    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:+UseZGC")
    assert "ParallelGC" not in _tuned({})["spark.driver.extraJavaOptions"]


def test_the_local_jvm_of_the_test_session_was_tuned(spark):
    from dedup_lib.spark import JVM_TUNING, is_connect

    if is_connect(spark):
        pytest.skip("a Connect session's JVM settings are the server's")
    options = spark.conf.get("spark.driver.extraJavaOptions")
    assert all(option in options for option in JVM_TUNING), options


@pytest.mark.connect
def test_hashed_keeps_every_row_in_the_sessions_shuffle_partitions(spark):
    """Hashed by a key before counting by it: every row kept, each key in one partition, and
    as many partitions as the session shuffles to, even where adaptive execution would merge
    a repartition of so few rows into one."""
    from pyspark.sql import functions as F

    from dedup_lib.spark import hashed

    rows = spark.range(2_000).select((F.col("id") % 500).alias("k"))
    where = F.spark_partition_id().alias("p")
    before = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "true")
    try:
        placed = hashed(rows, "k").select("k", where).toPandas()
        merged = rows.repartition("k").select(where).distinct().count()
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", before)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    assert len(placed) == 2_000
    assert placed.groupby("k")["p"].nunique().max() == 1
    assert placed["p"].nunique() == partitions > merged


@pytest.mark.connect
def test_to_pandas_tables_write_to_parquet_on_classic_and_connect(spark, tmp_path):
    """A Spark Connect client leaves the plan's metrics in ``attrs``, which pandas writes as
    JSON into Parquet metadata: a table from the library must write as any other."""
    import pandas as pd
    from pyspark.sql import functions as F

    from dedup_lib.analysis.summaries import summarize
    from dedup_lib.spark import to_pandas

    table = to_pandas(spark.range(3).select(F.col("id").alias("n")))
    assert table.attrs == {}
    table.to_parquet(tmp_path / "n.parquet")
    assert pd.read_parquet(tmp_path / "n.parquet")["n"].tolist() == [0, 1, 2]

    verdicts = spark.createDataFrame(
        [("orders", "accepted", None)], "entity string, verdict string, reason string"
    )
    summarize(verdicts).to_parquet(tmp_path / "summary.parquet")


class _Conf:
    def __init__(self, master: str | None) -> None:
        self.master = master

    def get(self, key: str, default: str | None = None) -> str | None:
        assert key == "spark.master"
        return self.master if self.master is not None else default


class _Session:
    """A classic session as far as local_cores reads it: its master."""

    def __init__(self, master: str | None) -> None:
        self.conf = _Conf(master)


@pytest.mark.parametrize(
    ("master", "cores"),
    [
        ("local", 1),
        ("local[3]", 3),
        ("local[*]", os.cpu_count()),
        ("local[2,4]", 2),
        ("local[*, 4]", os.cpu_count()),
        ("spark://host:7077", None),
        ("yarn", None),
        ("local-cluster[2,1,1024]", None),
        (None, None),
    ],
)
def test_local_cores_reads_the_master(master, cores):
    from dedup_lib.spark import local_cores

    assert local_cores(_Session(master)) == cores


def test_the_local_session_lets_a_collect_take_half_its_heap(spark):
    """Not Spark's 1 GiB whatever the heap: the explorer's build on 100 M sends brings back
    1.2 GiB (benchmarks/README.md)."""
    from dedup_lib.memory import result_size

    heap = spark.conf.get("spark.driver.memory")
    assert spark.conf.get("spark.driver.maxResultSize") == result_size(heap)


#: What moves where a driver JVM listens, none of them set: listening()'s defaults.
LISTENING_VARIABLES = (
    "SPARK_LOCAL_IP",
    "SPARK_LOCAL_HOSTNAME",
    "DEDUP_SPARK_DRIVER_HOST",
    "DEDUP_SPARK_UI",
)


@pytest.fixture
def unset(monkeypatch):
    for name in LISTENING_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_jvm_started_here_listens_on_loopback_by_default(unset):
    """The driver, its block manager (spark.driver.host's default) and the UI (which only
    SPARK_LOCAL_IP moves) on 127.0.0.1."""
    from dedup_lib.spark.session import listening

    settings, env = listening(None, None)
    assert settings == {}
    assert env == {"SPARK_LOCAL_HOSTNAME": "127.0.0.1", "SPARK_LOCAL_IP": "127.0.0.1"}


@pytest.mark.parametrize(
    ("driver_host", "ui", "settings", "env"),
    [
        (
            "10.0.0.5",
            None,
            {"spark.driver.host": "10.0.0.5"},
            {"SPARK_LOCAL_IP": "127.0.0.1"},
        ),
        (
            None,
            "off",
            {"spark.ui.enabled": "false"},
            {"SPARK_LOCAL_HOSTNAME": "127.0.0.1"},
        ),
        (
            None,
            "0.0.0.0:4050",
            {"spark.ui.enabled": "true", "spark.ui.port": "4050"},
            {"SPARK_LOCAL_HOSTNAME": "127.0.0.1", "SPARK_LOCAL_IP": "0.0.0.0"},
        ),
        (
            "node-1.cluster",
            "[::1]:0",
            {
                "spark.driver.host": "node-1.cluster",
                "spark.ui.enabled": "true",
                "spark.ui.port": "0",
            },
            {"SPARK_LOCAL_IP": "::1"},
        ),
    ],
)
def test_the_options_move_the_driver_and_the_ui(unset, driver_host, ui, settings, env):
    from dedup_lib.spark.session import listening

    assert listening(driver_host, ui) == (settings, env)


def test_the_environment_says_where_when_no_option_does(unset):
    """``$DEDUP_SPARK_*`` as the options (how ``explore`` reaches its kernels); the user's own
    ``SPARK_LOCAL_IP`` is theirs: the driver and the UI follow it, as in Spark."""
    from dedup_lib.spark.session import listening

    unset.setenv("DEDUP_SPARK_DRIVER_HOST", "10.0.0.5")
    unset.setenv("DEDUP_SPARK_UI", "off")
    assert listening(None, None) == (
        {"spark.driver.host": "10.0.0.5", "spark.ui.enabled": "false"},
        {},
    )
    unset.delenv("DEDUP_SPARK_DRIVER_HOST")
    unset.delenv("DEDUP_SPARK_UI")
    unset.setenv("SPARK_LOCAL_IP", "10.0.0.6")
    assert listening(None, None) == ({}, {})


@pytest.mark.parametrize("text", ["host:", "a b:1", "[::1", "h:65536", ""])
def test_a_ui_address_needs_a_host_and_a_port_in_range(text):
    from dedup_lib.spark.session import ui_address

    with pytest.raises(ValueError, match="HOST:PORT"):
        ui_address(text)


def test_the_jvm_environment_is_set_while_it_starts_and_restored_after(unset):
    from dedup_lib.spark.session import _environment

    unset.setenv("SPARK_LOCAL_HOSTNAME", "mine")
    with _environment({"SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "x"}):
        assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
        assert os.environ["SPARK_LOCAL_HOSTNAME"] == "x"
    assert "SPARK_LOCAL_IP" not in os.environ
    assert os.environ["SPARK_LOCAL_HOSTNAME"] == "mine"
