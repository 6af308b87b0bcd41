"""The ledger's plans through the streaming query, on a slice of the incident sample (its first
half hour landed as three files of ten minutes, some sends delayed into the next file and a
few past the watermark), with a crash after a plan is recorded and before it is staged: the
restarted query and feed answer every send once, with the batch replay's verdict where it was
on time and ``late`` where it was not."""

from __future__ import annotations

import glob
import os
import shutil
from datetime import timedelta

import pytest
from pyspark.sql import functions as F

from dedup_lib import DedupPolicy, load_telemetry, sample_path
from dedup_lib.live.checkpoint import Folders
from dedup_lib.live.executors.plans import PlanFeed, run_plans
from dedup_lib.live.landing.ledger import Reading
from executors_kit import answers, keyed, replayed, start, verdicts

POLICY = DedupPolicy("PT10M", partitioning=False)
LATENESS = timedelta(minutes=1)
START = "2026-11-03 20:00:00"


def _minutes(minutes: int) -> F.Column:
    return F.lit(START).cast("timestamp") + F.expr(f"INTERVAL {minutes} MINUTES")


def _slice(spark):
    """The sends, the late ones, and the files: sends of each ten minutes, those of its last
    30 s delayed into the next file, those of 20:00:00-20:00:20 landed with the third (late),
    and a fourth of one send a day later, which moves the watermark past them all."""
    sends = load_telemetry(spark, sample_path("incident.parquet")).valid
    sends = sends.where(F.col("send_time") < _minutes(30))
    late = F.col("send_time") < _minutes(0) + F.expr("INTERVAL 20 SECONDS")
    delayed = F.col("send_time") + F.expr("INTERVAL 30 SECONDS")
    plan = F.floor((F.unix_seconds(delayed) - F.unix_seconds(_minutes(0))) / 600)
    sends = sends.withColumn("plan", F.when(late, 2).otherwise(F.least(plan, F.lit(2))))
    flush = (
        sends.limit(1)
        .withColumn("send_time", _minutes(24 * 60))
        .withColumn("message_id", F.lit("flush"))
        .withColumn("event_id", F.lit(-1).cast("long"))
    )
    files = [sends.where(F.col("plan") == n).drop("plan") for n in range(3)]
    return sends.drop("plan"), sends.where(late).drop("plan"), [*files, flush.drop("plan")]


def _land(frame, landing: str, name: str) -> None:
    """``frame`` landed as one Parquet file, renamed in whole."""
    work = os.path.join(os.path.dirname(landing), "writing")
    frame.coalesce(1).write.mode("overwrite").parquet(work)
    (part,) = glob.glob(os.path.join(work, "part-*.parquet"))
    os.replace(part, os.path.join(landing, name))
    shutil.rmtree(work)


@pytest.mark.spark
def test_plans_after_a_crash_answer_each_send_once(spark, tmp_path):
    sends, late, files = _slice(spark)
    landing = str(tmp_path / "landing")
    os.makedirs(landing)
    folders = Folders(str(tmp_path / "out"), str(tmp_path), str(tmp_path / "refused"), None)
    reading = Reading("parquet", settle=0.0)

    def from_chunks(recorded):
        return keyed(spark.read.parquet(*recorded.paths), POLICY)

    def crash(recorded):
        raise RuntimeError("killed")

    query = start(spark, str(tmp_path), LATENESS)
    try:
        feed = PlanFeed(landing, reading, folders, query, from_chunks)
        for number in range(2):
            _land(files[number], landing, f"sends-{number}.parquet")
            assert feed.step().batch == number
            query.settle()
        assert feed.step() is None
        _land(files[2], landing, "sends-2.parquet")
        feed.keyed = crash
        with pytest.raises(RuntimeError, match="killed"):
            feed.step()
        before = query.figures()
    finally:
        query.stop()
    assert sorted(os.listdir(folders.plans)) == ["plan-0000000001.json", "plan-0000000002.json"]

    query = start(spark, str(tmp_path), LATENESS)
    try:
        feed = PlanFeed(landing, reading, folders, query, from_chunks)
        assert feed.step().batch == 2  # the recorded plan, from its chunks
        query.settle()
        _land(files[3], landing, "sends-3.parquet")
        assert feed.step().batch == 3
        query.settle()
        assert feed.step() is None
        after = query.figures()
    finally:
        query.stop()
    assert not os.listdir(folders.chunks)
    # each plan's file read is gone once its micro-batch is committed: the last may be left
    assert set(os.listdir(query.inbox.folder)) <= {"plan-0000000003.parquet"}

    got = answers(verdicts(spark, str(tmp_path)))
    late_ids = {r["event_id"] for r in late.select("event_id").collect()}
    assert late_ids
    assert {k for k, v in got.items() if v[1] == "late"} == late_ids
    expected = replayed(sends.join(late, "event_id", "left_anti"), POLICY)
    assert {k: v for k, v in got.items() if k not in late_ids and k != -1} == expected
    assert -1 not in got
    assert sum(v[1] == "duplicate" for v in expected.values()) > 50
    # Spark's batch ids go on from the checkpoint: no micro-batch with sends runs twice.
    ran = [[f.batch for f in figures if f.sends] for figures in (before, after)]
    assert min(ran[1]) > max(ran[0])
    assert sum(f.dropped for f in [*before, *after]) == 0


class _Feed:
    """A feed whose ledger finds ``landed`` plans, one step each (None: nothing new), and
    says ``more`` while the budget left some behind."""

    def __init__(self, landed):
        self.landed, self.more, self.settled = list(landed), False, 0
        self.query = self

    def step(self):
        found = self.landed.pop(0) if self.landed else None
        self.more = found == "budget"
        return None if found in (None, "budget") else found

    def settle(self):
        self.settled += 1


def test_once_feeds_until_nothing_is_left_then_settles():
    feed = _Feed([0, "budget", 1, None, 2])
    assert run_plans(feed, once=True, sleep=pytest.fail) == 2
    assert feed.settled == 1
    assert feed.landed == [2]


def test_watching_polls_until_stopped():
    feed = _Feed([0, None, None, 1])
    naps = []
    stop = iter([False] * 4 + [True])
    staged = run_plans(feed, once=False, poll=0.5, stopping=lambda: next(stop), sleep=naps.append)
    assert staged == 2
    assert naps == [0.5, 0.5]
    assert feed.settled == 0
