"""Every input gets a clear answer: one escaped line on stderr, options refused before Spark
starts, Spark's errors and bugs as one line with their details in the log."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from types import SimpleNamespace

import pytest

from dedup_lib.cli import main
from dedup_lib.errors import InputError
from dedup_lib.workbench.report import ReportError, cell_error

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
DAY = str(SAMPLES / "day.parquet")
HOSTILE = "\x1b]0;pwned\x07\x1b[2J"
WATCH = ["watch"]
TO = ["--out", "/tmp/dedup-test-out", "--checkpoint", "/tmp/dedup-test-ck"]


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    """Spark's log (and the CLI's details) in a folder of the test's own."""
    folder = tmp_path / "log"
    monkeypatch.setenv("DEDUP_LOG_DIR", str(folder))
    return folder


@pytest.fixture
def no_spark(monkeypatch, log_dir):
    """Starting Spark, or the postmortem's notebook, fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr("dedup_lib.cli.terminal.get_spark", refuse)
    monkeypatch.setattr("dedup_lib.workbench.report.run_postmortem", refuse)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    return _only_line(capsys.readouterr().err)


def _only_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("not a folder")
    return str(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", DAY, "--window", "P99999999999D"], "--window 'P99999999999D': "),
        (["simulate", DAY, "--window", "soon"], "window: cannot read 'soon'"),
        (["simulate", DAY, "--window", "inf"], "--window 'inf': "),
        (["simulate", DAY, "--window", "1e400"], "--window '1e400': "),
        (["simulate", DAY, "--window", "99999999999.00:00:00"], "--window '99999999999.00:00:00'"),
        (["simulate", DAY, "--window", "0:99:99"], "0:99:99"),
        (["simulate", DAY, "--entities", "{deep}"], "nested too deeply"),
        (["simulate", DAY, "--entities", "{huge}"], "characters)"),
        (["simulate", "no/such.parquet"], "no/such.parquet does not exist"),
        (["simulate", DAY, "--map", "oops"], "expected SOURCE=CANONICAL"),
        (["simulate", DAY, "--content", " , "], "--content ' , ': name at least one column"),
        (["simulate", DAY, "--out", "{file}/verdicts"], "is a file, not a folder"),
        (["simulate", DAY, "--entities", "no/such.json"], "no/such.json"),
        (["generate", "{file}/sends"], "is a file, not a folder"),
        (["generate", "/tmp/x", "--columns", "event_id,colour"], "unknown column(s) colour"),
        (["generate", "/tmp/x", "--columns", ","], "no column named"),
        (["generate", "/tmp/x", "--kept-window", "P99D"], "--kept-window 'P99D': "),
        (["generate", "/tmp/x", "--kept-window", "soon"], "--kept-window 'soon': "),
        (["generate", "/tmp/x", "--partitioning"], "--partitioning goes with --kept-window"),
        (["postmortem", DAY, "--window", "P99999999999D"], "--window 'P99999999999D': "),
        (["postmortem", "no/such.parquet"], "no/such.parquet does not exist"),
        (
            ["postmortem", DAY, "--start", "2026-11-03T22:00", "--end", "2026-11-03T21:00"],
            "--end 2026-11-03T21:00 is not after --start 2026-11-03T22:00",
        ),
        (["postmortem", DAY, "--out-dir", "{file}/reports"], "is a file, not a folder"),
        ([*WATCH, "{file}", *TO], "is a file: watch needs the folder files land in"),
        ([*WATCH, "no/such", *TO], "no/such is missing: watch needs the folder"),
        ([*WATCH, str(SAMPLES), *TO, "--alerts", "{file}/a.jsonl"], "is a file, not a folder"),
        ([*WATCH, str(SAMPLES), "--out", f"{SAMPLES}/v", "--checkpoint", "/tmp/c"], "inside the"),
        ([*WATCH, str(SAMPLES), *TO, "--window", "soon"], "window: cannot read 'soon'"),
        ([*WATCH, str(SAMPLES), *TO, "--entities", "no/such.json"], "no/such.json"),
        ([*WATCH, str(SAMPLES), *TO, "--content", " , "], "name at least one column"),
    ],
)
def test_a_bad_option_is_one_line_before_spark_starts(
    no_spark, capsys, a_file, tmp_path, argv, message
):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 10_000 + "]" * 10_000)
    huge = tmp_path / "huge.json"
    huge.write_text(
        '{"resources": [{"type": "Microsoft.ServiceBus/namespaces/queues", "name": "ns/q", '
        '"properties": {"requiresDuplicateDetection": true, '
        '"duplicateDetectionHistoryTimeWindow": "' + "P" * 5_000_000 + '"}}]}'
    )
    for name, value in {"{file}": a_file, "{deep}": str(deep), "{huge}": str(huge)}.items():
        argv = [arg.replace(name, value) for arg in argv]
    assert main([*argv, "--quiet"]) == 1
    line = _one_line(capsys)
    assert line.startswith(f"dedup-lib {argv[0]}: error: ")
    assert message in line
    assert "internal error" not in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", DAY, "--remote", "spark-server"], "argument --remote: expected sc://"),
        (["generate", "/tmp/x", "--rows", "0"], "argument --rows: expected at least 1"),
        (["generate", "/tmp/x", "--rows", "1e20"], "argument --rows: expected a whole number"),
        (
            ["generate", "/tmp/x", "--rows", "10_000_000_000_000"],
            "argument --rows: expected at most",
        ),
        (["generate", "/tmp/x", "--seed", "-1"], "argument --seed: expected at least 0"),
        (["generate", "/tmp/x", "--malformed", "2"], "argument --malformed: expected a share"),
        (["postmortem", DAY, "--start", "yesterday"], "argument --start: expected an ISO 8601"),
        (["postmortem", DAY, "--end", "2026-11-31T00:00"], "argument --end: expected an ISO 8601"),
        (["postmortem", DAY, "--entity", ""], "argument --entity: expected a queue or topic"),
        (["postmortem", DAY, "--entity", HOSTILE], "argument --entity: expected a queue or topic"),
        ([*WATCH, str(SAMPLES), *TO, "--lateness", "soon"], "argument --lateness: cannot read"),
        ([*WATCH, str(SAMPLES), *TO, "--every", "0"], "argument --every: expected a number of"),
        ([*WATCH, str(SAMPLES), "--out", "/tmp/o"], "the following arguments are required"),
    ],
)
def test_a_malformed_command_line_exits_2_before_spark_starts(no_spark, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--quiet"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"dedup-lib {argv[0]}: error: {message}")
    assert "\x1b" not in err


def test_hostile_text_in_an_error_is_escaped(no_spark, capsys):
    assert main(["simulate", f"{HOSTILE}.parquet", "--quiet"]) == 1
    line = _one_line(capsys)
    assert "\x1b" not in line
    assert "\x07" not in line
    assert "\\x1b]0;pwned\\x07\\x1b[2J.parquet does not exist" in line


def test_a_bug_is_one_line_with_its_traceback_in_the_log(monkeypatch, capsys, log_dir):
    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError(f"division by zero\n{HOSTILE}")

    monkeypatch.setattr("dedup_lib.cli.terminal.get_spark", broken)
    assert main(["simulate", DAY, "--quiet"]) == 1
    line = _one_line(capsys)
    log = log_dir / "spark.log"
    assert line.startswith("dedup-lib simulate: error: internal error: ZeroDivisionError: ")
    assert line.endswith(f"(details: {log})")
    assert "\x1b" not in line
    assert "Traceback (most recent call last)" in log.read_text()
    assert ", in broken" in log.read_text()


def test_a_spark_error_is_its_first_line_and_where_the_log_is(monkeypatch, capsys, log_dir):
    from pyspark.errors import PySparkRuntimeError

    def gateway_exited(*args: object, **kwargs: object) -> None:
        raise PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    monkeypatch.setattr("dedup_lib.cli.terminal.get_spark", gateway_exited)
    assert main(["simulate", DAY, "--quiet"]) == 1
    line = _one_line(capsys)
    assert line.startswith("dedup-lib simulate: error: Java gateway process exited")
    assert line.endswith(f"(Spark's log: {log_dir / 'spark.log'})")


def test_a_library_error_in_a_notebook_cell_is_raised_again_as_itself(log_dir):
    failure = SimpleNamespace(
        ename="InputError", evalue="load_telemetry: /abs/in.csv has no send_time", traceback=[]
    )
    error = cell_error(failure, "/abs/in.csv", "in.csv")
    assert type(error) is InputError
    assert str(error) == "load_telemetry: in.csv has no send_time"


def test_a_library_error_a_spark_error_caused_in_a_cell_names_spark_log(log_dir):
    failure = SimpleNamespace(
        ename="InputError",
        evalue="load_telemetry: cannot read file:/abs/in.parquet as parquet",
        traceback=["\x1b[0;31mAnalysisException\x1b[0m", "File pyspark/errors/exceptions.py"],
    )
    error = cell_error(failure, "/abs/in.parquet", "in.parquet")
    log = log_dir / "spark.log"
    assert type(error) is InputError
    assert str(error) == (
        f"load_telemetry: cannot read file:/abs/in.parquet as parquet (Spark's log: {log})"
    )


def test_another_error_in_a_notebook_cell_is_one_line_and_its_traceback_logged(log_dir):
    failure = SimpleNamespace(
        ename="KeyError",
        evalue="'orders'\nsecond line",
        traceback=["\x1b[0;31mKeyError\x1b[0m Traceback", "cell 7, line 3"],
    )
    error = cell_error(failure)
    assert isinstance(error, ReportError)
    log = log_dir / "spark.log"
    assert str(error) == f"the postmortem notebook failed: KeyError: 'orders' (details: {log})"
    assert "KeyError Traceback\ncell 7, line 3" in log.read_text()


@pytest.fixture(scope="module")
def without_send_time(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Sends without a send_time column, and the one line ``dedup-lib postmortem`` prints for
    them: its notebook runs in a kernel of its own, whatever session the tests hold, so one
    run serves both passes."""
    folder = tmp_path_factory.mktemp("no-send-time")
    sends = folder / "no-send-time.csv"
    sends.write_text("message_id,entity\na,orders\nb,orders\n")
    err = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(err):
        patch.setenv("DEDUP_LOG_DIR", str(folder / "log"))
        assert main(["postmortem", str(sends), "--quiet", "--out-dir", str(folder / "out")]) == 1
    return sends, _only_line(err.getvalue())


@pytest.mark.connect
def test_postmortem_and_simulate_give_the_same_error_for_the_same_input(
    spark, capsys, log_dir, without_send_time
):
    sends, reported = without_send_time
    assert main(["simulate", str(sends), "--quiet"], spark=spark) == 1
    simulated = _one_line(capsys)
    assert "has no send_time column" in simulated
    assert reported.split(": error: ", 1)[1] == simulated.split(": error: ", 1)[1]
