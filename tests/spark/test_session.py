"""spark.session: the session as the library starts it: its settings (Arrow batches, no call
sites, the driver's result size, the JVM's tuning), the local cores its master gives, where
its JVM listens, and what Spark's status store keeps of finished work (issue 70: the live
monitor runs a query every few seconds for weeks, and Spark's defaults, 1,000 SQL queries
with their plans, 1,000 jobs and stages, 100,000 tasks, every read's file listing until
250 MB of them, grew its JVM's heap for hours: benchmarks/bench_soak.py)."""

from __future__ import annotations

import os

import pytest

from dedup_lib.spark.session import LOCAL_DEFAULTS


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


BOUNDS = {
    "spark.sql.ui.retainedExecutions": 100,
    "spark.ui.retainedJobs": 100,
    "spark.ui.retainedStages": 100,
    "spark.ui.retainedTasks": 10_000,
    # Seconds a read's listing stays in the shared file status cache (no later read uses it).
    "spark.sql.metadataCacheTTLSeconds": 300,
}


def test_the_defaults_bound_what_the_status_store_keeps():
    for key, bound in BOUNDS.items():
        assert 0 < int(LOCAL_DEFAULTS[key]) <= bound, key


@pytest.mark.spark
def test_a_session_keeps_the_latest_queries_only(spark):
    """The settings reach the running JVM, and its SQL store drops the oldest queries."""
    from dedup_lib.spark import is_connect

    if is_connect(spark):
        pytest.skip("a Connect server keeps its own settings")
    conf = spark.sparkContext.getConf()
    for key, bound in BOUNDS.items():
        assert 0 < int(conf.get(key)) <= bound, key
    store = spark._jsparkSession.sharedState().statusStore()
    retained = BOUNDS["spark.sql.ui.retainedExecutions"]
    for _ in range(retained + 20 - min(store.executionsCount(), retained)):
        spark.range(1).collect()
    # The listener trims on its own thread, as queries end: the count settles at the bound.
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    assert store.executionsCount() <= retained
