"""cli.failures: the one line an error becomes on stderr: the library's message as it is, a
Spark error's first line, a bug as an internal error with its traceback in the log; each
escaped, each naming the log where Spark was involved. No Spark (its errors are raised
here)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkRuntimeError

from dedup_lib.cli.failures import error_line
from dedup_lib.errors import InputError

HOSTILE = "\x1b]0;pwned\x07"


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEDUP_LOG_DIR", str(tmp_path))
    return tmp_path / "spark.log"


def test_the_library_s_message_is_the_line_escaped(log: Path) -> None:
    line = error_line("simulate", InputError(f"load_telemetry: {HOSTILE}.csv does not exist"))
    assert (
        line == "dedup-lib simulate: error: load_telemetry: \\x1b]0;pwned\\x07.csv does not exist"
    )
    assert not log.exists()


def test_a_library_error_spark_caused_names_the_log(log: Path) -> None:
    try:
        try:
            raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
        except PySparkRuntimeError as exc:
            raise InputError("load_telemetry: cannot read x.parquet") from exc
    except InputError as exc:
        line = error_line("watch", exc)
    assert (
        line
        == f"dedup-lib watch: error: load_telemetry: cannot read x.parquet (Spark's log: {log})"
    )


def test_a_spark_error_is_its_first_line_its_details_logged(log: Path) -> None:
    exc = PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
    line = error_line("simulate", exc)
    assert line.startswith("dedup-lib simulate: error: Java gateway process exited")
    assert line.endswith(f"(Spark's log: {log})")
    assert "PySparkRuntimeError" in log.read_text()


def test_a_bug_is_an_internal_error_its_traceback_logged(log: Path) -> None:
    try:
        _ = 1 / 0
    except ZeroDivisionError as exc:
        line = error_line("reconcile", exc)
    assert line == (
        "dedup-lib reconcile: error: internal error: ZeroDivisionError: division by zero "
        f"(details: {log})"
    )
    assert "Traceback (most recent call last)" in log.read_text()
