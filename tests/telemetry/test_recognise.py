"""Which structured format a .json/.csv file is, from its first 64 KiB."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from dedup_lib.telemetry import recognise as recognising
from dedup_lib.telemetry.files import InputFiles
from dedup_lib.telemetry.recognise import HEAD_BYTES, file_head, recognise

TRACES = '{"resourceSpans":[{"resource":{},"scopeSpans":[]}]}\n'


def files(path: Path) -> InputFiles:
    return InputFiles(root=str(path), files=[str(path)])


def test_the_head_is_decompressed_and_cut(tmp_path: Path) -> None:
    plain = tmp_path / "a.json"
    plain.write_text("x" * (HEAD_BYTES + 10))
    packed = tmp_path / "a.json.gz"
    packed.write_bytes(gzip.compress(TRACES.encode()))
    broken = tmp_path / "b.json.gz"
    broken.write_bytes(b"not gzip")
    assert len(file_head(None, str(plain))) == HEAD_BYTES  # type: ignore[arg-type]
    assert file_head(None, str(packed)) == TRACES  # type: ignore[arg-type]
    assert file_head(None, str(broken)) == ""  # type: ignore[arg-type]


def test_traces_are_recognised_and_plain_lines_are_not(tmp_path: Path) -> None:
    traces = tmp_path / "traces.json"
    traces.write_text(TRACES)
    plain = tmp_path / "sends.jsonl"
    plain.write_text('{"message_id": "a", "send_time": 1700000000}\n')
    assert recognise(None, files(traces), "load_telemetry") == "otlp"  # type: ignore[arg-type]
    assert recognise(None, files(plain), "load_telemetry") is None  # type: ignore[arg-type]


@pytest.mark.connect
def test_a_remote_head_comes_through_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = tmp_path / "traces.json.gz"
    traces.write_bytes(gzip.compress((TRACES * 3).encode()))
    monkeypatch.setattr(recognising, "local_path", lambda path: None)  # as for abfss://
    uri = "file://" + str(traces)
    assert file_head(spark, uri) == TRACES.rstrip("\n")
    assert file_head(spark, uri + ".missing") == ""
    assert recognise(spark, InputFiles(root="x", files=[uri]), "load_telemetry") == "otlp"
