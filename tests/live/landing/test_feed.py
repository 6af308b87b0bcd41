"""live.feed: a landing ends when a later one starts into its folder, or when its folder is
removed (notebook 05 run again in the same kernel does both), quietly and without landing
its files in the new run's folder. No Spark."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from dedup_lib.live.landing.feed import land_in_steps


@pytest.fixture
def thread_errors(monkeypatch):
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


def _source(folder, prefix: str):
    folder.mkdir()
    for i in range(4):
        (folder / f"{prefix}{i}.jsonl").write_text("{}\n")
    return str(folder)


def test_a_landing_started_again_ends_the_one_before(tmp_path, thread_errors):
    landing = tmp_path / "landing"
    first = land_in_steps(_source(tmp_path / "a", "a"), str(landing), every=0.2)
    shutil.rmtree(landing)  # as the notebook starts afresh
    # a pathlib.Path is its text
    second = land_in_steps(Path(_source(tmp_path / "b", "b")), landing, every=0.05)
    first.join(timeout=5)
    second.join(timeout=5)
    assert not first.is_alive()
    assert sorted(p.name for p in landing.iterdir()) == [
        "b0.jsonl",
        "b1.jsonl",
        "b2.jsonl",
        "b3.jsonl",
    ]
    assert thread_errors == []


def test_a_landing_whose_folder_is_removed_ends_quietly(tmp_path, thread_errors):
    landing = tmp_path / "landing"
    feeder = land_in_steps(_source(tmp_path / "a", "a"), str(landing), every=0.05)
    shutil.rmtree(landing)
    feeder.join(timeout=5)
    assert not feeder.is_alive()
    assert not landing.exists()
    assert thread_errors == []
