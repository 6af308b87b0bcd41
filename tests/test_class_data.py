"""The class-data archive of the local Spark JVM: when it is written, read, adopted, cleared."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dedup_lib import class_data
from dedup_lib.class_data import SWITCH, _name, archive_options

JAVA = "/usr/bin/java"


def _part(folder, pid: int, *, age: float = 120.0, size: int = 10):
    part = folder / f"{_name(JAVA)}.{pid}.part"
    part.write_bytes(b"x" * size)
    then = time.time() - age
    os.utime(part, (then, then))
    return part


def _gone_pid() -> int:
    """The pid of a process that has exited."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_the_first_jvm_writes_the_archive_under_a_part_name_of_its_own(tmp_path):
    options = archive_options(tmp_path / "jvm", JAVA, 17)
    assert options == [
        f"-XX:ArchiveClassesAtExit={tmp_path / 'jvm' / _name(JAVA)}.{os.getpid()}.part"
    ]


def test_a_finished_part_is_adopted_and_read(tmp_path):
    part = _part(tmp_path, _gone_pid(), size=1000)
    options = archive_options(tmp_path, JAVA, 17)
    archive = tmp_path / f"{_name(JAVA)}.jsa"
    assert options == [f"-XX:SharedArchiveFile={archive}"]
    assert archive.read_bytes() == b"x" * 1000
    assert not part.exists()


@pytest.mark.parametrize(
    ("writer", "age"), [("alive", 120.0), ("gone", 1.0)], ids=["writer alive", "written lately"]
)
def test_while_another_jvm_writes_it_none_is_read_or_written(tmp_path, writer, age):
    pid = os.getppid() if writer == "alive" else _gone_pid()
    part = _part(tmp_path, pid, age=age)
    assert archive_options(tmp_path, JAVA, 17) == []
    assert part.exists()
    assert not (tmp_path / f"{_name(JAVA)}.jsa").exists()


def test_finished_parts_beside_an_archive_are_removed(tmp_path):
    archive = tmp_path / f"{_name(JAVA)}.jsa"
    archive.write_bytes(b"archive")
    leftover, empty = _part(tmp_path, _gone_pid()), _part(tmp_path, _gone_pid() + 100_000, size=0)
    assert archive_options(tmp_path, JAVA, 17) == [f"-XX:SharedArchiveFile={archive}"]
    assert not leftover.exists()
    assert not empty.exists()
    assert archive.read_bytes() == b"archive"


def test_java_19_and_later_manage_the_archive_themselves(tmp_path):
    archive = tmp_path / f"{_name(JAVA)}.jsa"
    assert archive_options(tmp_path, JAVA, 21) == [
        "-XX:+AutoCreateSharedArchive",
        f"-XX:SharedArchiveFile={archive}",
    ]


def test_another_java_gets_another_archive():
    assert _name(JAVA) != _name(sys.executable)
    assert _name(JAVA).startswith("spark-")


def test_it_can_be_turned_off_and_a_folder_that_cannot_be_made_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert archive_options(blocker / "jvm", JAVA, 17) == []
    monkeypatch.setenv(SWITCH, "0")
    assert archive_options(tmp_path, JAVA, 17) == []


def test_the_local_jvm_of_the_test_session_was_started_with_it(spark):
    from dedup_lib.spark import cache_dir, is_connect

    if is_connect(spark):
        pytest.skip("a Connect session's JVM settings are the server's")

    options = spark.conf.get("spark.driver.extraJavaOptions")
    archived = "-XX:SharedArchiveFile=" in options or "-XX:ArchiveClassesAtExit=" in options
    # Without either, another JVM (a test's subprocess) was writing the archive then.
    assert archived or any((cache_dir() / "jvm").glob("*.part")), options


@pytest.mark.spark
def test_the_runs_jvms_write_an_archive_that_the_next_one_reads(tmp_path):
    """In the run's environment (its SPARK_CONF_DIR is on the JVM's class path): the JDK writes
    no archive for a class path with a non-empty folder on it, and then every JVM starts cold.
    The run's first JVM wrote it (``tests/conftest.py``, before the first test that starts
    one: from a fresh clone, as in CI, this run's); a JVM started as the run starts them reads
    it, and the JDK says nothing about it in Spark's log."""
    from dedup_lib.spark import cache_dir

    if os.environ.get("SPARK_REMOTE"):
        pytest.skip("a run on a remote Connect server starts no local JVM")
    folder = cache_dir() / "jvm"
    archives = [a for a in folder.glob("*.jsa") if a.stat().st_size > 0]
    assert archives, f"no archive in {folder}: {sorted(p.name for p in folder.iterdir())}"
    start = "from dedup_lib import get_spark; s = get_spark('cds', master='local[1]'); "
    shown = "print(s.conf.get('spark.driver.extraJavaOptions')); s.stop()"
    env = {**os.environ, "DEDUP_LOG_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", start + shown],
        env=env, check=True, timeout=300, capture_output=True, text=True,
    )  # fmt: skip
    assert any(f"-XX:SharedArchiveFile={a}" in done.stdout for a in archives), done.stdout
    log = (tmp_path / "spark.log").read_text(errors="replace")
    assert not [line for line in log.splitlines() if "[cds" in line]


def test_a_configuration_folder_with_files_gets_no_archive(tmp_path, monkeypatch):
    """Spark puts it on the JVM's class path, and the JDK archives no class path with a
    non-empty folder on it: writing one would fail at every exit."""
    conf = tmp_path / "conf"
    conf.mkdir()
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    assert archive_options(tmp_path / "jvm", JAVA, 17) != []
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    assert archive_options(tmp_path / "jvm", JAVA, 17) == []
    assert archive_options(tmp_path / "jvm", JAVA, 21) == []


def test_another_configuration_folder_gets_another_archive(tmp_path, monkeypatch):
    """It is on the class path, which a JVM reading an archive must share with the writer."""
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "one"))
    one = _name(JAVA)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "two"))
    assert _name(JAVA) != one


def test_another_jars_folder_gets_another_archive(tmp_path, monkeypatch):
    """A second environment with the same pyspark has the same jars in another folder: the JDK
    refuses an archive written with the other's class path, so it starts cold every time
    unless it writes one of its own."""
    for env in ("one", "two"):
        (tmp_path / env).mkdir()
        (tmp_path / env / "spark-core.jar").write_bytes(b"same")
    monkeypatch.setattr(class_data, "spark_jars", lambda: tmp_path / "one")
    one = _name(JAVA)
    monkeypatch.setattr(class_data, "spark_jars", lambda: tmp_path / "two")
    assert _name(JAVA) != one
