"""spark.logs: Spark's log goes to its file, the driver JVM told where; the terminal gets one
line."""

from __future__ import annotations

import os

import pytest


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
