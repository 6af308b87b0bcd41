"""``watch_duplicates`` with the state on the executors, end to end: the incident sample landed
and judged once, a restart with the same checkpoint judging nothing again and the rest when a
later send moves the watermark, each send with the batch replay's verdict; what the mode does
not do yet refused in a sentence; a checkpoint of the other mode refused."""

from __future__ import annotations

import shutil
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dedup_lib import (
    DedupPolicy,
    ServeOptions,
    StateOptions,
    WatchOptions,
    WriteOptions,
    load_telemetry,
    sample_path,
    watch_duplicates,
)
from dedup_lib.errors import InputError
from executors_kit import answers, replayed, verdicts

pytestmark = pytest.mark.spark

POLICY = DedupPolicy("PT10M")
EXECUTORS = WatchOptions(state=StateOptions("executors"))


def _watch(spark, tmp_path, options=EXECUTORS):
    return watch_duplicates(
        spark,
        tmp_path / "landing",
        POLICY,
        "PT1M",
        out=tmp_path / "out",
        checkpoint=tmp_path / "ck",
        once=True,
        options=options,
    )


@pytest.mark.usefixtures("spread_keys")
def test_the_incident_is_judged_once_with_the_replay_s_verdicts_across_a_restart(spark, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(sample_path("incident.parquet"), landing)

    first = _watch(spark, tmp_path)
    assert first.loaded["read"] == 29_872
    assert sum(line.judged for line in first.lines) == 29_719  # 153 wait for the watermark
    assert all(line.state.executors for line in first.lines)
    again = _watch(spark, tmp_path)
    assert again.loaded["micro_batches"] == 0
    assert len(verdicts(spark, str(tmp_path))) == 29_719

    incident = pq.read_table(landing / "incident.parquet")
    latest = pc.max(incident["send_time"]).as_py() + timedelta(days=1)
    later = incident.slice(0, 1)
    later = later.set_column(
        later.schema.get_field_index("event_id"),
        "event_id",
        pa.array([-1], incident.schema.field("event_id").type),
    )
    later = later.set_column(
        later.schema.get_field_index("send_time"),
        "send_time",
        pa.array([latest], incident.schema.field("send_time").type),
    )
    pq.write_table(later, landing / "later.parquet", use_deprecated_int96_timestamps=True)
    last = _watch(spark, tmp_path)
    assert sum(line.judged for line in last.lines) == 153
    got = answers(verdicts(spark, str(tmp_path)))
    assert got == replayed(load_telemetry(spark, str(landing / "incident.parquet")).valid, POLICY)


@pytest.mark.parametrize(
    ("options", "what"),
    [
        (WatchOptions(writing=WriteOptions(alerts="alerts.jsonl")), "writes no alerts file"),
        (WatchOptions(serving=ServeOptions(metrics="127.0.0.1:0")), "serves no metrics"),
    ],
)
def test_what_the_mode_does_not_do_yet_is_refused_in_a_sentence(tmp_path, options, what):
    asked = WatchOptions(writing=options.writing, serving=options.serving, state=EXECUTORS.state)
    refusal = rf"executors' {what} yet: leave it out, or use --state driver"
    with pytest.raises(InputError, match=refusal):
        watch_duplicates(None, tmp_path, POLICY, out=tmp_path / "o", checkpoint=tmp_path / "c",
                         options=asked)  # fmt: skip


def test_a_checkpoint_of_the_driver_s_mode_is_refused(spark, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(sample_path("incident.parquet"), landing)
    _watch(spark, tmp_path, WatchOptions())
    with pytest.raises(InputError, match=r"started with --state driver, .* --state executors does"):
        _watch(spark, tmp_path)


def test_a_memory_budget_is_the_driver_s_and_refused_of_the_executors(tmp_path):
    asked = WatchOptions(state=StateOptions("executors", memory=1 << 30))
    with pytest.raises(InputError, match=r"not in the driver's memory: leave --state-memory out"):
        watch_duplicates(None, tmp_path, POLICY, out=tmp_path / "o", checkpoint=tmp_path / "c",
                         options=asked)  # fmt: skip
    with pytest.raises(InputError, match=r"expected a positive number of bytes, got 0"):
        WatchOptions(state=StateOptions(memory=0)).check()
