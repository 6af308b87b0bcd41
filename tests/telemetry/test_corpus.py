"""Every file a user brings gets a clear answer, and no row is lost: the corpus in corpus.py
through load_telemetry and through ``dedup-lib simulate``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from codegen_kit import configured
from dedup_lib import DedupPolicy, detect_duplicates
from dedup_lib.cli import main
from dedup_lib.errors import DedupLibError, printable
from dedup_lib.telemetry.loader import load_once, load_telemetry
from telemetry.corpus import CASES, Case

ERRORS = [case for case in CASES if case.error is not None]
FINE = [case for case in CASES if case.error is None]
#: The inputs read once as simulate reads them: all that load but the 2,000-column one, whose
#: width the load's own test above plans once (15 s): reading once counts the same rows.
READ_ONCE = [case for case in FINE if case.name != "many-columns"]
JAVA = re.compile(r"org\.apache|py4j|Py4J|Traceback|\bat [\w$.]+\(|SQLSTATE|\[[A-Z_]+\.[A-Z_]+\]")


def assert_one_clear_line(message: str, case: Case) -> None:
    assert "\n" not in message, message
    assert not JAVA.search(message), message
    assert printable(message) == message, "control characters reach the user"
    assert len(message) < 600, message
    assert case.error is not None
    assert re.search(case.error, message), message
    assert case.names is not None
    assert case.names in message, message


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_input_gets_an_answer(spark: Any, tmp_path: Path, case: Case) -> None:
    path = case.build(tmp_path)
    if case.error is not None:
        with pytest.raises(DedupLibError) as info:
            load_telemetry(spark, str(path), mapping=case.mapping)
        assert_one_clear_line(str(info.value), case)
        return
    loaded = load_telemetry(spark, str(path), mapping=case.mapping)
    counts = loaded.counts()
    assert (counts["read"], counts["valid"], counts["quarantined"]) == case.counts
    assert counts["skipped"] == case.not_sends
    # Counted again, apart from the load's tally: the frames the user gets hold those rows.
    assert loaded.valid.count() == counts["valid"]
    assert loaded.quarantine.count() == counts["quarantined"]
    assert len(loaded.ignored) == case.ignored
    if case.reasons:
        reasons = loaded.quarantine_reasons()
        assert dict(zip(reasons["reason"], reasons["count"], strict=True)) == case.reasons
    if case.check is not None:
        case.check(loaded)


@pytest.mark.parametrize("case", READ_ONCE, ids=[c.name for c in READ_ONCE])
def test_read_once_counts_as_the_load_does(spark: Any, tmp_path: Path, case: Case) -> None:
    """Counted by the first action that reads the valid rows (simulate's one pass: the
    replay, written, with Spark's adaptive execution on as users have it), every input gives
    the counts and reasons its own load gives; also where no row is valid, whose pass loses
    the counts it observed (:func:`~dedup_lib.spark.frames.observed`)."""
    path = case.build(tmp_path)
    pending = load_once(spark, str(path), mapping=case.mapping)
    replayed = detect_duplicates(pending.valid, DedupPolicy("PT10M"))
    with configured(spark, {"spark.sql.adaptive.enabled": "true"}):
        replayed.write.format("noop").mode("overwrite").save()
    loaded = pending.loaded()
    counts = loaded.counts()
    assert (counts["read"], counts["valid"], counts["quarantined"]) == case.counts
    assert counts["skipped"] == case.not_sends
    assert loaded.files["file"].size == 1
    reasons = loaded.quarantine_reasons()
    expected = case.reasons or ({} if not counts["quarantined"] else None)
    if expected is not None:
        assert dict(zip(reasons["reason"], reasons["count"], strict=True)) == expected
    assert int(reasons["count"].sum()) == counts["quarantined"]


@pytest.mark.parametrize("case", ERRORS, ids=[c.name for c in ERRORS])
def test_the_command_line_gives_the_same_one_line(
    spark: Any, tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    path = case.build(tmp_path)
    maps = [f"--map={source}={target}" for source, target in (case.mapping or {}).items()]
    status = main(["simulate", str(path), "-q", *maps], spark=spark)
    out, err = capsys.readouterr()
    assert status == 1
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dedup-lib simulate: error: ")
    assert_one_clear_line(lines[0], case)


@pytest.mark.connect
def test_the_command_line_says_what_it_read_and_skipped(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = next(c for c in CASES if c.name == "bookkeeping-ignored-and-listed")
    path = case.build(tmp_path)
    (path / "_\x1b[2Jx").write_text("")

    assert main(["simulate", str(path), "-q"], spark=spark) == 0
    out = capsys.readouterr().out
    assert ": 2 rows read, 2 replayed, 0 quarantined." in out
    assert "Read 1 file(s); ignored, not telemetry: " in out
    assert "_SUCCESS (Spark/Hadoop bookkeeping)" in out
    assert "_\\x1b[2Jx (hidden)" in out
    assert "and 2 more" in out
    assert "\x1b" not in out
