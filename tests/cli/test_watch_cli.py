"""dedup-lib watch --once on a sample: simulate's verdicts, a line per micro-batch, and
alerts that name the entity, the key and why."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from dedup_lib.cli import main

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
COLUMNS = ["verdict", "reason", "dedup_key", "original_send_time", "original_event_id"]


@pytest.mark.slow  # on Connect, the lines through the checkpoint: tests/live/test_watch.py
def test_watch_once_gives_simulates_verdicts_on_traces(spark, capsys, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    with gzip.open(SAMPLES / "incident-otlp.jsonl.gz", "rt") as whole:
        lines = whole.readlines()
    # The first quarter of the Collector's lines: whole batches of spans, traces kept whole.
    with gzip.open(landing / "traces.jsonl.gz", "wt") as part:
        part.writelines(lines[: len(lines) // 4])
    policy = ["--window", "PT20S", "--partitioning"]
    out, alerts = tmp_path / "verdicts", tmp_path / "alerts.jsonl"
    argv = ["watch", str(landing), "--out", str(out), "--checkpoint", str(tmp_path / "ck")]
    assert main([*argv, *policy, "--once", "--alerts", str(alerts), "--quiet"], spark=spark) == 0
    printed = capsys.readouterr().out
    assert "sends judged" in printed
    assert "not sends" in printed

    batch = tmp_path / "batch.parquet"
    sim = ["simulate", str(landing), *policy, "--out", str(batch), "--quiet", "--no-diagnostics"]
    assert main(sim, spark=spark) == 0
    want = pd.read_parquet(batch).set_index("event_id")
    got = pd.read_parquet(out).set_index("event_id")
    assert got.index.is_unique
    assert set(got.index) <= set(want.index)
    assert (got["verdict"] != "late").all()
    # Only the sends within the lateness of the last one wait for a watermark to come.
    last = pd.to_datetime(want["send_time"]).max()
    waiting = want[pd.to_datetime(want["send_time"]) >= last - pd.Timedelta(minutes=1)]
    assert set(want.index) - set(got.index) <= set(waiting.index)
    pd.testing.assert_frame_equal(
        got[COLUMNS].sort_index(), want.loc[got.index, COLUMNS].sort_index(), check_dtype=False
    )
    rejected = (got["verdict"] == "rejected").sum()
    lines = [json.loads(line) for line in alerts.read_text().splitlines()]
    assert sum(a["kind"] == "rejected" for a in lines) == rejected > 0
    assert all(a["entity"] and a["why"] for a in lines)


def test_watch_prints_what_the_read_did_before_the_first_line(monkeypatch, capsys, tmp_path):
    """The read's notes (``Watch.notes``: pandas' nanosecond Parquet, tests/live/test_watch)
    print once each, as simulate prints them, before the micro-batches' lines."""
    from dedup_lib.live import watch as live

    def watching(spark, source, *args, on_batch, on_note, **kwargs):
        on_note("<i>land</i>: a note")
        on_batch("a line")
        return SimpleNamespace(metrics_address=None, loaded=Counter(), refused=None, waiting=False)

    monkeypatch.setattr(live, "watch_duplicates", watching)
    (tmp_path / "land").mkdir()
    argv = ["watch", str(tmp_path / "land"), "--out", str(tmp_path / "out"), "--once"]
    assert main([*argv, "--checkpoint", str(tmp_path / "ck"), "--quiet"], spark=object()) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["Note: <i>land</i>: a note.", "a line"]


@pytest.mark.slow
def test_watch_log_format_json_prints_a_json_object_per_line(spark, capsys, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "incident.parquet").write_bytes((SAMPLES / "incident.parquet").read_bytes())
    argv = [
        "watch",
        str(landing),
        "--out",
        str(tmp_path / "v"),
        "--checkpoint",
        str(tmp_path / "ck"),
    ]
    assert main([*argv, "--once", "--log-format", "json"], spark=spark) == 0
    printed = capsys.readouterr()
    records = [json.loads(line) for line in printed.out.splitlines()]
    steps = [json.loads(line) for line in printed.err.splitlines()]
    assert [r["event"] for r in records] == ["micro_batch", "summary"]
    batch = records[0]
    assert batch["judged"] > 0
    assert batch["state"]["keys"] > 0
    assert (batch["stream"], batch["batch"]) == ("batch", 0)
    assert batch["message"].startswith("batch 0: ")
    assert {r["level"] for r in records} == {"info"}
    assert all(r["time"].endswith("+00:00") for r in records + steps)
    assert steps[0]["event"] == "step"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_failure_prints_its_traceback_on_stderr(monkeypatch, capsys, tmp_path, fmt):
    """A service manager's journal keeps stderr: a failure is there whole, with its line; the
    library's answer to a bad input or setting is its line alone."""
    from dedup_lib.errors import InputError
    from dedup_lib.live import watch as live

    failure: list[Exception] = [OSError(28, "No space left on device")]

    def failing(*args, **kwargs):
        raise failure[0]

    monkeypatch.setattr(live, "watch_duplicates", failing)
    (tmp_path / "land").mkdir()
    argv = ["watch", str(tmp_path / "land"), "--out", str(tmp_path / "out"), "--once"]
    argv += ["--checkpoint", str(tmp_path / "ck"), "--quiet", "--log-format", fmt]
    assert main(argv, spark=object()) == 1
    err = capsys.readouterr().err
    line = "dedup-lib watch: error: internal error: OSError: [Errno 28] No space left on device"
    if fmt == "json":
        (record,) = [json.loads(text) for text in err.splitlines()]
        assert record["level"] == "error"
        assert record["message"].startswith(line)
        assert "Traceback (most recent call last)" in record["traceback"]
        assert "OSError" in record["traceback"]
    else:
        assert err.startswith("Traceback (most recent call last)")
        assert err.splitlines()[-1].startswith(line)

    failure[0] = InputError("the checkpoint <ck> was written with other policy")
    assert main(argv, spark=object()) == 1
    err = capsys.readouterr().err
    said = "dedup-lib watch: error: the checkpoint <ck> was written with other policy"
    if fmt == "json":
        (record,) = [json.loads(text) for text in err.splitlines()]
        assert record["message"] == said
        assert "traceback" not in record
    else:
        assert err == said + "\n"


def test_a_state_memory_is_a_size(capsys, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    folders = ["--out", str(tmp_path / "o"), "--checkpoint", str(tmp_path / "c")]
    argv = ["watch", str(landing), *folders]
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--state-memory", "lots"], spark=object())
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert "--state-memory: expected a size such as 4g or 512m, got 'lots'" in said
    refused = main([*argv, "--state-memory", "4GiB", "--state", "executors"], spark=object())
    assert refused == 1
    assert "leave --state-memory out" in capsys.readouterr().err


def test_a_once_run_whose_micro_batch_is_refused_says_so_and_exits_1(spark, capsys, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "incident.parquet").write_bytes((SAMPLES / "incident.parquet").read_bytes())
    folders = ["--out", str(tmp_path / "o"), "--checkpoint", str(tmp_path / "c")]
    argv = ["watch", str(landing), *folders, "--once", "--state-memory", "1m"]
    assert main(argv, spark=spark) == 1
    said = capsys.readouterr().out
    assert "micro-batch 0 refused: its 29,872 sends could take the driver's state" in said
    assert "--state executors, with a new checkpoint" in said
