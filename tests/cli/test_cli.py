"""The ``dedup-lib`` command line: simulate and generate, end to end, and its errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from dedup_lib import DedupLibWarning, DedupPolicy, detect_duplicates, load_telemetry
from dedup_lib.cli import main
from dedup_lib.rules.durations import parse_window
from dedup_lib.sweep.grid import configurable_window

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
DAY_SAMPLES = ["day.parquet", "day-azure.csv.gz", "day-python.jsonl.gz"]


def test_the_library_s_warnings_reach_stderr_and_others_spark_s_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A service's journal shows what the library went on despite (a start tried again), as
    text or, for ``watch --log-format json``, a JSON line; pyspark's or pandas' warnings stay
    in Spark's log, out of the command's answer. Python's display of warnings is the same
    after the command as before."""
    monkeypatch.setenv("DEDUP_LOG_DIR", str(tmp_path))

    def run(args: object) -> int:
        warnings.warn("a start, tried again (2 of 5): late\x1b[2J", DedupLibWarning, stacklevel=1)
        warnings.warn("a library's internals", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr("dedup_lib.cli.rules.run", run)
    monkeypatch.setattr("dedup_lib.cli.watch.run", run)
    said = "a start, tried again (2 of 5): late\\x1b[2J"
    watch = ["watch", str(tmp_path), "--out", str(tmp_path / "v"), "--checkpoint", "c"]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        shown = warnings.showwarning
        assert main(["rules"]) == 0
        assert capsys.readouterr() == ("", f"dedup-lib rules: warning: {said}\n")
        assert main([*watch, "--log-format", "json"]) == 0
        out, err = capsys.readouterr()
        assert warnings.showwarning is shown
    record = json.loads(err)
    assert (out, record["level"], record["event"]) == ("", "warning", "warning")
    assert record["message"] == f"dedup-lib watch: warning: {said}"
    logged = (tmp_path / "spark.log").read_text(encoding="utf-8")
    assert logged.count("UserWarning: a library's internals") == 2
    assert "tried again" not in logged


def _tables(output: str) -> str:
    """The report without its first line (which names the input file)."""
    return output.split("\n", 1)[1]


@pytest.mark.usefixtures("compiled_test")
def test_simulate_gives_identical_verdicts_on_every_sample_format(spark, capsys):
    reports = []
    for name in DAY_SAMPLES:
        argv = ["simulate", str(SAMPLES / name), "--quiet", "--no-diagnostics"]
        assert main(argv, spark=spark) == 0
        reports.append(capsys.readouterr().out)
    assert _tables(reports[0]) == _tables(reports[1]) == _tables(reports[2])
    report = reports[0]
    assert "Verdicts per entity" in report
    assert "Against the ground truth" in report
    assert "true resends" in report
    assert "unparseable send_time" in report


@pytest.mark.connect
def test_simulate_writes_verdicts_and_honours_the_policy(spark, capsys, tmp_path):
    out = tmp_path / "verdicts.parquet"
    args = ["simulate", str(SAMPLES / "incident.parquet"), "--quiet", "--window", "PT20S"]
    assert main([*args, "--out", str(out)], spark=spark) == 0
    short = capsys.readouterr().out
    assert "window 20s, partitioning disabled" in short
    verdicts = pd.read_parquet(out)
    assert {"verdict", "reason", "dedup_key", "logical_id"} <= set(verdicts.columns)
    # the Python replay kernel, as the option asks (the JVM one, the default, above)
    longer = ["simulate", str(SAMPLES / "incident.parquet"), "--quiet", "--kernel", "python"]
    assert main(longer, spark=spark) == 0
    long = capsys.readouterr().out
    # a longer window catches more: the restart resends come minutes after their first send
    caught = [
        int(line.split()[3]) for text in (short, long) for line in text.splitlines()
        if line.strip().startswith("(all)") and len(line.split()) == 8
    ]  # fmt: skip
    assert caught[0] < caught[1]
    assert main([*args, "--out", str(out)], spark=spark) == 1
    assert "exists; pass --overwrite" in capsys.readouterr().err


@pytest.mark.usefixtures("compiled_test")
def test_simulate_with_content_columns_says_the_window_that_catches_every_resend(spark, capsys):
    """Content columns named: the window that would catch every resend after it, in words and
    in ISO 8601. (What the entities' settings make simulate print is checked on the
    entity-settings guide's own line: tests/test_command_lines.py.)"""
    argv = ["simulate", str(SAMPLES / "day.parquet"), "--quiet"]
    assert main([*argv, "--content", "sender,logical_id"], spark=spark) == 0
    misses = capsys.readouterr().out.split("Missed resends", 1)[1]
    assert "or longer would catch every resend that came after the window" in misses
    advice = re.search(r"A window of (\S+) or longer .*: configure (P\S+) \((\S+)\)\.", misses)
    assert advice is not None, misses
    longest, iso, short = advice.groups()
    assert parse_window(iso) == parse_window(short) == configurable_window(longest)
    assert parse_window(iso) >= parse_window(longest)


@pytest.mark.connect
def test_generate_writes_what_it_is_asked(spark, capsys, tmp_path):
    out = tmp_path / "sends.csv"
    columns = "event_id,message_id,send_time"
    argv = ["generate", str(out), "--rows", "20000", "--seed", "4", "--quiet", "--single-file",
            "--format", "csv", "--names", "azure", "--columns", columns]  # fmt: skip
    assert main(argv, spark=spark) == 0
    assert capsys.readouterr().out.strip() == str(out)
    sends = pd.read_csv(out)
    assert list(sends.columns) == ["EventId", "MessageId", "EnqueuedTimeUtc"]
    assert abs(len(sends) - 20_000) < 1_000
    times = sends.EnqueuedTimeUtc.dropna()
    assert times[times.str.startswith("2026-11-")].is_monotonic_increasing


def test_generate_keeps_what_a_broker_with_the_window_accepts(spark, tmp_path):
    every, kept = tmp_path / "every.parquet", tmp_path / "kept.parquet"
    argv = ["generate", "--rows", "5000", "--seed", "2", "--quiet", "--single-file",
            "--entity", "orders", "--malformed", "0"]  # fmt: skip
    assert main([*argv, str(every)], spark=spark) == 0
    assert main([*argv, str(kept), "--kept-window", "PT1M"], spark=spark) == 0
    sends, accepted = pd.read_parquet(every), pd.read_parquet(kept)
    assert set(sends.entity) == {"orders"}
    loaded = load_telemetry(spark, str(every)).valid
    verdicts = detect_duplicates(loaded, DedupPolicy("PT1M")).toPandas()
    expected = verdicts[verdicts.verdict == "accepted"].event_id
    assert sorted(accepted.event_id) == sorted(expected)
    assert list(accepted.columns) == list(sends.columns)
    assert 0 < len(accepted) < len(sends)
    assert accepted.send_time.notna().all()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "no/such/file.parquet"], "no/such/file.parquet does not exist"),
        (["simulate", str(SAMPLES / "day.parquet"), "--window", "PT5S"], "between 00:00:20"),
        (["simulate", str(SAMPLES / "day.parquet"), "--map", "oops"], "expected SOURCE=CANONICAL"),
        (
            ["simulate", str(SAMPLES / "day.parquet"), "--map", "Nope=message_id"],
            "mapping names column 'Nope'",
        ),
        (["generate", "no/such/dir/x", "--columns", "event_id,colour"], "unknown column(s) colour"),
        (
            ["simulate", str(SAMPLES / "day.parquet"), "--entities", str(SAMPLES / "README.md")],
            "README.md",
        ),
        (
            ["simulate", str(SAMPLES / "day.parquet"), "--content", "body"],
            "content: column(s) body not in the telemetry",
        ),
    ],
)
def test_errors_are_one_line_and_exit_1(spark, capsys, argv, message):
    assert main([*argv, "--quiet"], spark=spark) == 1
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert err.startswith(f"dedup-lib {argv[0]}: error: ")


def test_a_misspelt_content_column_is_refused_before_the_replay(spark, capsys, monkeypatch):
    import dedup_lib.replay.engine

    def replayed(*_: object, **__: object) -> None:
        raise AssertionError("the input was replayed before its content columns were checked")

    monkeypatch.setattr(dedup_lib.replay.engine, "detect_duplicates", replayed)
    argv = ["simulate", str(SAMPLES / "incident.parquet"), "--content", "payload_hash,Body"]
    assert main([*argv, "--quiet"], spark=spark) == 1
    assert "content: column(s) Body not in the telemetry" in capsys.readouterr().err


def test_bad_arguments_exit_2_with_usage(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["generate", "/tmp/x", "--rows", "0"])
    assert stop.value.code == 2
    assert "expected at least 1" in capsys.readouterr().err


def test_help_documents_every_option_with_examples():
    for command in ("simulate", "generate", "reconcile"):
        text = subprocess.run(
            [sys.executable, "-m", "dedup_lib", command, "--help"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "examples:" in text
        assert f"dedup-lib {command} " in text
        for option in ("--quiet", "--master", "--remote"):
            assert option in text


#: What answering ``--help`` must not load: a typo or a question answers at once.
HEAVY = ("pyspark", "pandas", "numpy", "pyarrow", "plotly", "ipywidgets", "anywidget")
COMMANDS = (
    "simulate",
    "generate",
    "postmortem",
    "reconcile",
    "explore",
    "doctor",
    "connect-options",
)


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in COMMANDS)], ids=str)
def test_help_loads_no_spark_pandas_or_widgets(argv):
    probe = (
        "import json, sys\n"
        "from dedup_lib.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True
    )
    assert "usage: dedup-lib" in done.stdout
    assert done.stderr.splitlines()[-1] == "[]", done.stderr


def test_samples_are_small_and_documented():
    files = sorted(p for p in SAMPLES.rglob("*") if p.is_file() and p.name != "README.md")
    names = [p.relative_to(SAMPLES).as_posix() for p in files]
    entities = ["entities-arm.json", "entities-az.json", "entities-emulator.json"]
    incident = ["incident.parquet", "incident-otlp.jsonl.gz", "incident-app-insights.csv.gz",
                "incident-app-insights.json.gz", "incident-kept/orders.json.gz"]  # fmt: skip
    assert names == sorted([*DAY_SAMPLES, *incident, *entities])
    assert sum(p.stat().st_size for p in files) < 30 * 1024 * 1024
    readme = (SAMPLES / "README.md").read_text()
    for name in names:
        assert f"`{name}`" in readme


@pytest.mark.connect
def test_simulate_reads_traces_and_says_how_many_spans_were_not_sends(spark, capsys, tmp_path):
    from datetime import UTC, datetime

    from dedup_lib.synth.exports import write_otlp

    at = datetime(2026, 11, 3, 21, 0, tzinfo=UTC)
    frame = spark.createDataFrame(
        [("a", at, None, 1), ("a", at.replace(second=5), None, 2), ("b", at, "orders", 3)],
        "message_id string, send_time timestamp, entity string, event_id long",
    )
    path = tmp_path / "traces.json"
    write_otlp(frame, str(path))
    argv = ["simulate", str(path), "--quiet", "--format", "otlp", "--entity", "payments"]
    assert main(argv, spark=spark) == 0
    out = capsys.readouterr().out
    assert ": 9 rows read, 3 replayed, 0 quarantined." in out
    assert "Read 1 file(s); 6 otlp record(s) skipped, not sends (" in out
    assert "not a Service Bus span: 3" in out
    table = out.split("Verdicts per entity", 1)[1]
    assert "payments" in table
    assert "orders" in table


def test_simulate_reads_pandas_parquet_and_says_how_once(spark, capsys, tmp_path):
    path = tmp_path / "<i>sends &amp;.parquet"
    times = pd.to_datetime(
        ["2026-11-03 21:00:00.000000400", "2026-11-03 21:00:05"], format="ISO8601"
    )
    pd.DataFrame({"message_id": ["a", "a"], "send_time": times}).to_parquet(path)
    assert main(["simulate", str(path), "--quiet", "--window", "PT1M"], spark=spark) == 0
    out = capsys.readouterr().out
    assert ": 2 rows read, 2 replayed, 0 quarantined." in out
    (note,) = [line for line in out.splitlines() if line.startswith("Note: ")]
    assert f"Note: {path}: nanosecond timestamps (the pandas and pyarrow default)" in note
    table = out.split("Verdicts per entity", 1)[1]
    (row,) = [line.split() for line in table.splitlines() if line.startswith("(none)")]
    assert row[1:4] == ["2", "1", "1"]  # sends, accepted, duplicates: 5 s apart, 1-minute window


def test_simulate_checks_entity_and_format_before_spark(capsys, tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{}\n")
    for option, value, says in (
        ("--entity", " ", "expected a queue or topic name"),
        ("--format", "otlp2", "invalid choice: 'otlp2'"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(["simulate", str(path), option, value])
        assert stop.value.code == 2
        assert says in capsys.readouterr().err
