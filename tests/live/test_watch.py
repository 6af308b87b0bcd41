"""watch_duplicates: the batch replay's verdicts on sends that land out of order, in files.

Two hours of the day sample land as a stream of files (:mod:`landing_kit`): most sends in
the file of their time, some delayed within the lateness into later files, some hours late.
After each file ``once`` processes what is there. Every on-time send at or below the final
watermark must carry exactly the verdict ``detect_duplicates`` gives it over the on-time
sends, once; every send that arrived behind the watermark must be ``late``, with the
watermark it missed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from dedup_lib import (
    DedupPolicy,
    detect_duplicates,
    load_entity_policies,
    load_telemetry,
    sample_path,
)
from dedup_lib.live.options import ReadOptions, StateOptions, WatchOptions, WriteOptions
from dedup_lib.live.watch import watch_duplicates
from dedup_lib.spark import to_pandas
from landing_kit import FILES, arrivals, expected_late, first_hours, land

#: One window for every entity, and each entity's own (windows from 5 minutes to an hour,
#: payments partitioned with sessions, audit without detection). One window with
#: partitioning adds no path of its own here: the monitor keys sends with the batch replay's
#: rules whatever the policy, and ``tests/cli/test_watch_cli.py`` watches with it on both
#: kinds of session.
POLICIES = {
    "one window": DedupPolicy("PT10M"),
    "per entity": "entities-arm.json",
}
#: How each policy's files write their times: "ns" as pandas does by default (nanoseconds,
#: read as epoch nanoseconds and said in :attr:`Watch.notes`), "us" as Spark holds them.
UNITS = {"one window": "us", "per entity": "ns"}


@pytest.fixture(scope="module")
def sends(spark) -> pd.DataFrame:
    """Two hours of the day sample's valid sends, typed as the loader gives them."""
    return first_hours(load_telemetry(spark, sample_path("day.parquet")).valid.toPandas())


def policy_of(name: str):
    shape = POLICIES[name]
    return load_entity_policies(sample_path(shape)) if isinstance(shape, str) else shape


def batch_verdicts(
    spark, on_time: pd.DataFrame, folder: Path, policy, unit: str = "us"
) -> pd.DataFrame:
    folder.mkdir()
    land(on_time, folder, 0, unit)
    result = detect_duplicates(load_telemetry(spark, str(folder)).valid, policy)
    cols = ["event_id", "verdict", "reason", "dedup_key", "original_send_time", "original_event_id"]
    return to_pandas(result.select(*cols)).set_index("event_id")


#: The policies each state's mode is run with: the executors' state with each entity's own
#: window (each key's window and partitioning travel with its sends); its crashes are
#: tests/cli/test_watch_executors.py's.
RUNS = [("one window", "driver"), ("per entity", "driver"), ("per entity", "executors")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), RUNS, ids=[f"{n}-{m}" for n, m in RUNS])
def test_stream_gives_batch_verdicts(spark, sends, tmp_path, name, mode):
    policy = policy_of(name)
    file_of = arrivals(sends)
    late, final = expected_late(sends, file_of)
    assert 50 < len(late) < len(sends) // 10, "the plan must make some sends late, not most"
    landing = tmp_path / "landing"
    landing.mkdir()
    alerts = tmp_path / "alerts.jsonl"
    # the folders as pathlib.Path, the crashed run's as text: either names the same folder
    folders = {"out": tmp_path / "out", "checkpoint": tmp_path / "ck"}
    options = WatchOptions(
        writing=WriteOptions(alerts=alerts),
        state=StateOptions(mode),
    )
    unit = UNITS[name]
    for i in range(FILES):
        land(sends[file_of == i], landing, i, unit)
        if name == "one window" and i == 2:
            crash_once(spark, landing, policy, folders, options)
        told: list[str] = []
        watch = watch_duplicates(
            spark,
            landing,
            policy,
            "PT2M",
            once=True,
            options=options,
            on_note=told.append,
            **folders,
        )
        assert told == list(watch.notes)
        assert len(told) == (unit == "ns"), told
        assert all("nanosecond timestamps" in note for note in told)

    got = pd.read_parquet(folders["out"])
    assert got["event_id"].is_unique, "a send was judged twice"
    is_late = got["verdict"] == "late"
    assert set(got.loc[is_late, "event_id"]) == late
    missed = got.loc[is_late, "missed_watermark"].astype("datetime64[us]").astype("int64")
    times = got.loc[is_late, "send_time"].astype("datetime64[us]").astype("int64")
    assert (times <= missed).all()

    on_time = sends[~sends["event_id"].isin(late)]
    want = batch_verdicts(spark, on_time, tmp_path / "batch", policy, unit)
    judged = got[~is_late].set_index("event_id")
    micros = on_time["send_time"].astype("datetime64[us]").astype("int64")
    due = set(on_time.loc[micros <= final, "event_id"])
    assert due <= set(judged.index), f"{len(due - set(judged.index))} on-time sends never judged"
    assert set(judged.index) <= set(on_time["event_id"])
    columns = list(want.columns)
    left = judged.loc[sorted(judged.index), columns]
    right = want.loc[sorted(judged.index), columns]
    pd.testing.assert_frame_equal(left, right, check_dtype=False)
    assert (left["verdict"] == "duplicate").sum() > 50
    assert_alerted_once(spark, alerts, judged)


def assert_alerted_once(
    spark, alerts: Path, judged: pd.DataFrame, resends_too: bool = True
) -> None:
    """Each collision, each rejected send and (``resends_too``) each resend within the
    horizon among ``judged`` alerted once, and nothing else."""
    raised = pd.read_json(alerts, lines=True)
    assert raised[["kind", "event_id"]].value_counts().max() == 1, "an alert was raised twice"
    collided = collisions(judged)
    rejected = set(judged.index[judged["verdict"] == "rejected"])
    assert set(raised.loc[raised.kind == "collision", "event_id"]) == collided
    assert set(raised.loc[raised.kind == "rejected", "event_id"]) == rejected
    assert len(collided) > 10
    resent = resends(spark, judged) if resends_too else set()
    assert set(raised.loc[raised.kind == "resend", "event_id"]) == resent
    assert len(resent) > 10 or not resends_too
    assert set(raised["kind"]) <= {"collision", "rejected", "resend"}


def collisions(judged: pd.DataFrame) -> set[int]:
    """Duplicates whose original carried other content (by payload_hash)."""
    content = judged["payload_hash"]
    dups = judged[judged["verdict"] == "duplicate"]
    originals = content.reindex(dups["original_event_id"].astype("int64")).to_numpy()
    return set(dups.index[dups["payload_hash"].to_numpy() != originals])


def resends(spark, judged: pd.DataFrame) -> set[int]:
    """Judged sends that missed_resends (the batch analysis) finds within an hour of the
    copy before them."""
    from dedup_lib import missed_resends

    result = spark.createDataFrame(judged.reset_index())
    misses = missed_resends(result).where("delay <= 3600").select("event_id").toPandas()
    return set(misses["event_id"])


@pytest.mark.connect
def test_on_spark_connect_lines_reach_the_caller_and_a_restart_resumes(spark, tmp_path):
    """On Connect the micro-batches run in the server's Python: their lines reach on_batch
    here through the checkpoint, while the monitor runs and when it stops, each once; a
    restart with the checkpoint judges only what landed since, and the verdicts are the
    batch replay's."""
    from dedup_lib.spark import is_connect

    if not is_connect(spark):
        pytest.skip("classic: test_stream_gives_batch_verdicts")
    sends = to_pandas(load_telemetry(spark, sample_path("incident.parquet")).valid)
    sends = sends.sort_values("send_time").head(6000).reset_index(drop=True)
    half = len(sends) // 2
    landing, policy = tmp_path / "landing", DedupPolicy("PT10M")
    landing.mkdir()
    folders = {"out": str(tmp_path / "out"), "checkpoint": str(tmp_path / "ck")}
    land(sends.iloc[:half], landing, 0)
    seen: list = []
    every = WatchOptions(reading=ReadOptions(trigger="1 second"))
    watch = watch_duplicates(
        spark, str(landing), policy, "PT1M", options=every, on_batch=seen.append, **folders
    )
    try:
        deadline = time.monotonic() + 120
        while not any(line.judged for line in seen) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert any(line.judged for line in seen), "no line reached on_batch while running"
    finally:
        watch.stop()
    assert seen == list(watch.lines)
    assert [line.batch for line in seen] == sorted({line.batch for line in seen})
    assert sum(c["read"] for c in watch.loads) == half

    land(sends.iloc[half:], landing, 1)
    again = watch_duplicates(spark, str(landing), policy, "PT1M", once=True, **folders)
    assert sum(c["read"] for c in again.loads) == len(sends) - half
    assert min(line.batch for line in again.lines) > max(line.batch for line in seen)

    got = pd.read_parquet(folders["out"]).set_index("event_id")
    assert got.index.is_unique, "a send was judged twice"
    assert len(got) == sum(line.judged for line in [*seen, *again.lines])
    assert (got["verdict"] != "late").all()
    want = batch_verdicts(spark, sends, tmp_path / "batch", policy)
    columns = list(want.columns)
    pd.testing.assert_frame_equal(
        got[columns].sort_index(), want.loc[got.index, columns].sort_index(), check_dtype=False
    )
    assert len(got) > half


def crash_once(spark, landing: Path, policy, folders: dict[str, Path], options) -> None:
    """A run that dies after writing a micro-batch's verdicts, before Spark records it: the
    next run does that micro-batch again and must not write it twice."""

    def die(line) -> None:
        if line.judged:
            raise RuntimeError("killed mid-stream")

    as_text = {name: str(path) for name, path in folders.items()}
    with pytest.raises(RuntimeError, match="killed mid-stream"):
        watch_duplicates(
            spark, str(landing), policy, "PT2M", once=True, options=options, on_batch=die, **as_text
        )
