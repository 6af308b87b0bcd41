"""``dedup-lib reconcile``: a replay against an export of what the broker kept, end to end, and
its options refused before Spark starts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dedup_lib.cli import main

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _jsonl(path, rows: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


@pytest.fixture
def files(tmp_path):
    """Sends of ``orders`` (a resent at 100 s and 250 s, b retried after 30 s), and what a
    broker with a one-minute window kept of them: an export without an entity column."""
    sends = [("a", 0), ("a", 100), ("a", 250), ("b", 0), ("b", 30)]
    telemetry = _jsonl(
        tmp_path / "sends.jsonl",
        [
            {"event_id": i, "entity": "orders", "message_id": m, "send_time": _at(t)}
            for i, (m, t) in enumerate(sends)
        ],
    )
    kept = _jsonl(
        tmp_path / "kept.jsonl",
        [
            {"message_id": m, "send_time": _at(t + 2), "sequence_number": n}
            for n, (m, t) in enumerate([("a", 0), ("b", 0), ("a", 100), ("a", 250)])
        ],
    )
    return telemetry, kept


@pytest.mark.connect
def test_reconcile_prints_the_categories_and_the_window_that_agrees(spark, capsys, files):
    telemetry, kept = files
    argv = ["reconcile", telemetry, kept, "--entity", "orders", "--quiet"]
    assert main(argv, spark=spark) == 0
    out = capsys.readouterr().out
    assert "Kept " in out
    assert "4 rows read, 4 used, 0 quarantined" in out
    for category, count in (
        ("explained", 2),
        ("contradictions", 2),
        (r"unexplained \(telemetry gaps\)", 0),
        ("pairs inside the window", 2),
        ("accepted sends not kept", 0),
    ):
        assert re.search(rf"^\s*{category}\s+{count}\s", out, re.MULTILINE), category
    assert (
        "On orders, the broker kept 2 messages the replay at 10m calls duplicates: its window "
        "is at most 1m40s, or detection is off." in out
    )
    assert "Contradictions: kept messages the replay drops (first 2 of 2)" in out
    assert "Pairs: two kept messages of one key inside the window (first 2 of 2)" in out
    # A replay at the window it names agrees; a tolerance under the clocks' 2 s does not.
    assert main([*argv, "--window", "100"], spark=spark) == 0
    assert "agrees with the replay at 1m40s" in capsys.readouterr().out
    assert main([*argv, "--tolerance", "PT1S"], spark=spark) == 0
    assert "4 kept messages have no send in the telemetry within 1s" in capsys.readouterr().out


def test_reconcile_narrows_to_a_time_range(spark, capsys, files):
    telemetry, kept = files
    argv = ["reconcile", telemetry, kept, "--entity", "orders", "--quiet"]
    assert main([*argv, "--start", _at(50), "--end", _at(200)], spark=spark) == 0
    assert "On orders, the broker kept 1 message the replay at 10m calls a duplicate" in (
        capsys.readouterr().out
    )
    assert main([*argv[:3], "--quiet"], spark=spark) == 1
    assert "KEPT has no entity column (an export does not name its entity): pass --entity" in (
        capsys.readouterr().err
    )


@pytest.fixture
def no_spark(monkeypatch, tmp_path):
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setenv("DEDUP_LOG_DIR", str(tmp_path / "log"))
    monkeypatch.setattr("dedup_lib.cli.terminal.get_spark", refuse)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tolerance", "soon"], "--tolerance 'soon': tolerance: cannot read 'soon'"),
        (["--window", "PT5S"], "between 00:00:20"),
        (["--start", "2026-11-03T22:00", "--end", "2026-11-03T21:00"], "is not after --start"),
    ],
)
def test_options_are_refused_before_spark_starts(no_spark, capsys, files, extra, message):
    telemetry, kept = files
    assert main(["reconcile", telemetry, kept, "--quiet", *extra]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("dedup-lib reconcile: error: ")
    assert message in err
    assert len(err.splitlines()) == 1


def test_missing_files_and_bad_arguments(no_spark, capsys, files, tmp_path):
    telemetry, _ = files
    assert main(["reconcile", telemetry, str(tmp_path / "none.json"), "--quiet"]) == 1
    assert "none.json does not exist" in capsys.readouterr().err
    for extra in (["--kept-format", "xml"], ["--entity", ""]):
        with pytest.raises(SystemExit) as stop:
            main(["reconcile", telemetry, telemetry, *extra])
        assert stop.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


@pytest.mark.connect
def test_a_kept_file_without_message_id_is_one_error(spark, capsys, files, tmp_path):
    telemetry, _ = files
    kept = _jsonl(tmp_path / "times.jsonl", [{"send_time": _at(0)}])
    argv = ["reconcile", telemetry, kept, "--entity", "orders", "--quiet"]
    assert main(argv, spark=spark) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "message_id" in err
    assert "times.jsonl" in err
    assert "(--map '<your column>=message_id' on the command line)" in err
    assert err.endswith("(KEPT's columns are mapped with --kept-map)")


@pytest.mark.connect
def test_each_file_s_columns_are_mapped_by_its_own_option(spark, capsys, files, tmp_path):
    telemetry, kept = files
    renamed = []
    for path, names in ((telemetry, {"message_id": "Id"}), (kept, {"send_time": "Enqueued"})):
        rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
        rows = [{names.get(k, k): v for k, v in row.items()} for row in rows]
        renamed.append(_jsonl(tmp_path / f"renamed-{len(renamed)}.jsonl", rows))
    argv = ["reconcile", *renamed, "--entity", "orders", "--quiet"]
    maps = ["--map", "Id=message_id", "--kept-map", "Enqueued=send_time"]
    assert main([*argv, *maps], spark=spark) == 0
    mapped = capsys.readouterr().out
    assert main(["reconcile", telemetry, kept, "--entity", "orders", "--quiet"], spark=spark) == 0
    assert mapped.replace("renamed-0", "sends").replace("renamed-1", "kept") == (
        capsys.readouterr().out
    )
    assert main([*argv, *maps[:2]], spark=spark) == 1
    assert "no send_time column" in capsys.readouterr().err


@pytest.mark.connect
def test_each_file_s_format_is_named_by_its_own_option(spark, capsys, files, tmp_path):
    """Files whose names say no format (``.txt``): TELEMETRY's named with ``--format``, KEPT's
    with ``--kept-format``, and an error about KEPT's names the latter."""
    copies = []
    for path in files:
        copies.append(tmp_path / f"{Path(path).stem}.txt")
        copies[-1].write_bytes(Path(path).read_bytes())
    argv = ["reconcile", *map(str, copies), "--entity", "orders", "--quiet", "--format", "json"]
    assert main(argv, spark=spark) == 1
    err = capsys.readouterr().err.strip()
    assert "cannot tell the format of" in err
    assert "kept.txt" in err
    assert "(--format parquet, csv or json on the command line)" in err
    assert err.endswith("(KEPT's format is named with --kept-format)")
    assert main([*argv, "--kept-format", "json"], spark=spark) == 0
    named = capsys.readouterr().out
    assert main(["reconcile", *files, "--entity", "orders", "--quiet"], spark=spark) == 0
    assert named.replace(".txt", ".jsonl") == capsys.readouterr().out


def test_reconcile_help_has_examples():
    text = subprocess.run(
        [sys.executable, "-m", "dedup_lib", "reconcile", "--help"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "examples:" in text
    assert "dedup-lib reconcile " in text
    for option in ("--tolerance", "--format", "--kept-format", "--entity", "--quiet", "--remote"):
        assert option in text
