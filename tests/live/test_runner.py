"""The monitor killed at each step of a micro-batch, then started again on its checkpoint: the
verdicts, the quarantined rows and the alerts come out as a run that was never killed gives them,
each once, and the alerts file has no cut line (docs/guide/live.md, "How it runs")."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.live import checkpoint, runner
from dedup_lib.live.landing.feed import _steps
from dedup_lib.live.options import WatchOptions, WriteOptions
from dedup_lib.live.output.sink import AlertsFile
from dedup_lib.live.state.store import KeyedState
from dedup_lib.live.watch import watch_duplicates

POLICY = DedupPolicy("PT10M")
FILES = 3


class KilledError(RuntimeError):
    """The process dies here."""


def run(spark, tmp: Path, crash=None) -> tuple[pd.DataFrame, list[dict]]:
    """The incident sample landed in three files, the monitor run once after each; ``crash``
    (a step's patch) kills the run after the second file, which then starts again."""
    landing = tmp / "landing"
    steps = _steps(sample_path("incident.parquet"), str(landing), FILES)
    landing.mkdir(parents=True)
    writing = WriteOptions(alerts=str(tmp / "alerts.jsonl"), quarantine=str(tmp / "refused"))
    outputs = {
        "out": str(tmp / "out"),
        "checkpoint": str(tmp / "ck"),
        "options": WatchOptions(writing=writing),
    }
    for i, step in enumerate(steps):
        step()
        if i == 1 and crash is not None:
            with crash(), pytest.raises(KilledError):
                watch_duplicates(spark, str(landing), POLICY, "PT1M", once=True, **outputs)
        watch_duplicates(spark, str(landing), POLICY, "PT1M", once=True, **outputs)
    alerts = [json.loads(line) for line in (tmp / "alerts.jsonl").read_text().splitlines()]
    return pd.read_parquet(tmp / "out"), alerts


def crashing(target, name: str, when=lambda *a, **k: True):  # type: ignore[no-untyped-def]
    """A patch of ``target.name`` that dies before doing anything, once ``when`` holds."""

    def patch(monkeypatch):  # type: ignore[no-untyped-def]
        real = getattr(target, name)

        def dying(*args, **kwargs):  # type: ignore[no-untyped-def]
            if when(*args, **kwargs):
                raise KilledError(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(target, name, dying)

    return patch


def _half_a_line(monkeypatch):  # type: ignore[no-untyped-def]
    """The alerts file written up to half a line, then the process dies."""

    def dying(self, batch, alerts):  # type: ignore[no-untyped-def]
        with open(self.path, "ab") as out:
            out.write(b'{"kind":"collision","entity":"ord')
        raise KilledError("append")

    monkeypatch.setattr(AlertsFile, "append", dying)


STEPS = {
    "chunks copied, plan not recorded": crashing(
        checkpoint, "write_json", lambda path, data: "plan-" in path
    ),
    "plan recorded, nothing read": crashing(runner, "load_micro_batch"),
    "verdicts written, no alert": crashing(runner, "alerts_of"),
    "alerts half appended": _half_a_line,
    "alerts appended, no commit": crashing(
        checkpoint, "write_json", lambda path, data: "commit-" in path
    ),
    "committed, nothing removed": crashing(KeyedState, "release"),
}


@pytest.fixture(scope="module")
def never_killed(spark, tmp_path_factory):
    return run(spark, tmp_path_factory.mktemp("never-killed"))


@pytest.mark.slow
@pytest.mark.parametrize("step", list(STEPS))
def test_a_kill_at_any_step_changes_nothing_written(
    spark, tmp_path, monkeypatch, never_killed, step
):
    from contextlib import contextmanager

    @contextmanager
    def crash():  # type: ignore[no-untyped-def]
        with monkeypatch.context() as patched:
            STEPS[step](patched)
            yield

    got, alerts = run(spark, tmp_path, crash)
    want, want_alerts = never_killed
    assert got["event_id"].is_unique, "a send was judged twice"
    key = ["event_id", "verdict", "original_event_id"]
    pd.testing.assert_frame_equal(
        got.sort_values("event_id")[key].reset_index(drop=True),
        want.sort_values("event_id")[key].reset_index(drop=True),
    )
    assert sorted(json.dumps(a, sort_keys=True) for a in alerts) == sorted(
        json.dumps(a, sort_keys=True) for a in want_alerts
    )
    assert len(alerts) > 100
