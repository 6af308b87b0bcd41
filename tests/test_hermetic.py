"""The suite keeps to itself: its own cache and log folder, and a local Connect server on a
free port, whatever else runs on the machine (``.ci/run`` runs the whole suite beside a
foreign listener on 15002 and another dedup-lib process on the user's cache)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dedup_lib.spark import cache_dir, free_port, spark_log_path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PORT = 15002


def test_the_run_writes_its_cache_and_log_under_build_only():
    ours = ROOT / "build" / "test-cache"
    assert cache_dir() == ours
    assert spark_log_path().parent == ours
    assert os.environ["DEDUP_LIB_CACHE"] == str(ours)


def test_spark_reads_the_runs_own_defaults(spark):
    conf = Path(os.environ["SPARK_CONF_DIR"])
    assert conf == ROOT / "build" / "test-cache" / "spark-conf"
    assert list(conf.iterdir()) == [], "a file there keeps the JDK from archiving the class path"
    assert (
        str(ROOT / "tests" / "spark-conf" / "spark-defaults.conf")
        in os.environ["PYSPARK_SUBMIT_ARGS"]
    )
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"  # the tests' own session


@pytest.mark.connect
def test_the_jvms_scratch_is_the_runs_own(spark):
    """Spark's local folders and the JVM's temporary folder are the run's, under build/: a JVM
    a test kills leaves its block manager, state stores and unpacked libraries there, not in
    /tmp."""
    scratch = Path(os.environ["DEDUP_TEST_JVM_SCRATCH"])
    assert scratch.parent == ROOT / "build" / "test-cache"
    row = spark.sql(
        "SELECT java_method('java.lang.System', 'getProperty', 'java.io.tmpdir') AS tmp,"
        " java_method('java.lang.System', 'getenv', 'SPARK_LOCAL_DIRS') AS local"
    ).first()
    assert (row["tmp"], row["local"]) == (str(scratch), str(scratch))
    assert spark.range(50).repartition(3).count() == 50  # a shuffle: the block manager's files
    assert list(scratch.glob("blockmgr-*")), "Spark's local folder is not the run's"


def test_a_run_removes_the_jvms_scratch_it_made():
    """A run makes its own scratch folder and removes it when it ends; xdist's workers, which
    inherit it, leave it alone."""
    cache = ROOT / "build" / "test-cache"
    before = set(cache.glob("jvm-scratch-*"))

    def collect(env: dict[str, str]) -> None:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
             "tests/test_hermetic.py::test_a_free_port_is_free"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]

    collect({k: v for k, v in os.environ.items() if k != "DEDUP_TEST_JVM_SCRATCH"})
    assert set(cache.glob("jvm-scratch-*")) == before
    collect(dict(os.environ))
    assert Path(os.environ["DEDUP_TEST_JVM_SCRATCH"]).is_dir()


def test_a_free_port_is_free():
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_free_port_is_none_the_system_hands_out_and_a_taken_one_is_passed_over(monkeypatch):
    """Below the range the system picks from for port 0, so no process (nor the server's own
    JVM) is handed it before the server binds it; and never one that is held."""
    from dedup_lib.spark import connect as spark

    low = spark._first_ephemeral_port()
    assert all(1024 <= free_port() < low for _ in range(20))
    with socket.create_server(("127.0.0.1", spark._PORTS_FROM + 7)) as held:
        picks = iter([7, 7, 8])
        monkeypatch.setattr(spark.secrets, "randbelow", lambda n: next(picks))
        assert free_port() == spark._PORTS_FROM + 8 != held.getsockname()[1]


class Listener:
    """A foreign server on a port: accepts each connection and closes it, counting them."""

    def __init__(self, port: int) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen()
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


@pytest.mark.spark
def test_a_local_connect_server_beside_a_foreign_one_on_15002(tmp_path):
    """PySpark's local Connect mode serves and connects on 15002, whoever holds it; the
    library's picks a free port, and never talks to the one that is there."""
    try:
        foreign: Listener | None = Listener(DEFAULT_PORT)
    except OSError:
        foreign = None  # held already (CI's neighbour): still foreign to this run
    script = (
        "from dedup_lib.spark import get_spark\n"
        "spark = get_spark('beside', remote='local[1]', config={'spark.ui.enabled': 'false'})\n"
        "print(spark.range(7).count(), type(spark).__module__)\n"
        "spark.stop()\n"
    )
    env = {**os.environ, "DEDUP_DRIVER_MEMORY": "1g", "DEDUP_LOG_DIR": str(tmp_path)}
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE"):
        env.pop(name, None)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["7", "pyspark.sql.connect.session"]
    if foreign is not None:
        assert foreign.accepted == 0
        foreign.sock.close()
