"""A plan's micro-batch pass written by Spark for the executors: the same valid sends, keyed,
and the same quarantined rows as the driver's pass brings into the driver, every record read
counted once; a pass whose written rows are not the records it counted is refused."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta

import pandas as pd
import pytest

from dedup_lib import DedupPolicy, load_telemetry, sample_path
from dedup_lib.columns import KEYED_CONTENT, SEND_MICROS, WINDOW
from dedup_lib.errors import DedupLibError
from dedup_lib.live.checkpoint import Folders
from dedup_lib.live.executors.plans import PlanFeed, run_plans
from dedup_lib.live.executors.staging import PlanIntake, stage_pass
from dedup_lib.live.intake.micro_batch import load_micro_batch, plan_micro_batch
from dedup_lib.live.landing.ledger import Reading
from dedup_lib.live.output.sink import part_name
from dedup_lib.telemetry.landing import open_landing
from executors_kit import answers, replayed, verdicts
from executors_kit import start as start_query

pytestmark = pytest.mark.spark

POLICY = DedupPolicy("PT1M")
CSV = """message_id,send_time,entity,payload_hash
a,2026-11-03T08:00:00Z,orders,h1
a,2026-11-03T08:00:30Z,orders,h1
b,yesterday,orders,h2
,2026-11-03T08:01:00Z,orders,h3
c,2026-11-03T08:02:00.000001Z,billing,h4
"""


def _by_event(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("event_id").reset_index(drop=True)


def _landed(spark, tmp_path):
    """The landing folder with :data:`CSV` landed in it, and that file's path."""
    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / "sends.csv").write_text(CSV)
    return open_landing(spark, str(folder)), [str(folder / "sends.csv")]


@pytest.mark.connect
def test_the_written_pass_is_the_driver_s_pass(spark, tmp_path):
    landing, paths = _landed(spark, tmp_path)
    content = ["payload_hash"]

    intake = load_micro_batch(plan_micro_batch(landing, paths, {}, POLICY, content, 3))
    run = plan_micro_batch(landing, paths, {}, POLICY, content, 3)
    staged = stage_pass(run, str(tmp_path / "written"))

    counted = {"read": 5, "valid": 4, "quarantined": 1, "skipped": 0}
    assert staged.counts == intake.counts == counted
    driver = _by_event(intake.sends.drop_columns([KEYED_CONTENT]).to_pandas())
    written = _by_event(staged.sends.toPandas())
    assert set(written.columns) == set(driver.columns)
    assert written[SEND_MICROS].tolist() == driver[SEND_MICROS].tolist()
    assert (written[WINDOW] == 60_000_000).all()
    pd.testing.assert_frame_equal(written[driver.columns], driver, check_dtype=False)
    assert staged.quarantine.toPandas().to_dict("list") == intake.quarantine.to_pydict()


@pytest.mark.connect
def test_rows_that_are_not_the_records_counted_are_refused(spark, tmp_path):
    landing, paths = _landed(spark, tmp_path)
    run = plan_micro_batch(landing, paths, {}, POLICY, [], 0)

    class Inflated:  # the pass's Observation, one record more than Spark wrote
        @property
        def get(self):
            return {**run.seen.get, "read": 6, "valid": 5}

    with pytest.raises(DedupLibError, match="rows would be lost in the micro-batch written"):
        stage_pass(dataclasses.replace(run, seen=Inflated()), str(tmp_path / "written"))


COLUMNS = ["event_id", "message_id", "send_time", "entity", "partition_key", "session_id"]
#: Rows whose time is unreadable, landed with the second file.
BAD = "-2,x,yesterday,orders,,\n-3,y,,orders,,\n"


@pytest.mark.usefixtures("spread_keys")
def test_plans_from_a_landing_answer_each_valid_send_once_and_quarantine_the_rest(spark, tmp_path):
    """Two CSV files of the incident's first twenty minutes, then a send a day later that
    moves the watermark past them, through the feed as ``watch --state executors`` runs it:
    every valid send answered once with the batch replay's verdict, the bad rows written
    once, as the plan's quarantine file."""
    incident = pd.read_parquet(sample_path("incident.parquet"), columns=COLUMNS)
    start = incident["send_time"].min()
    incident = incident[incident["send_time"] < start + pd.Timedelta(minutes=20)]
    first = incident[incident["send_time"] < start + pd.Timedelta(minutes=10)]
    second = incident.drop(first.index)
    flush = incident.head(1).assign(event_id=-1, send_time=start + pd.Timedelta(days=1))
    landing = tmp_path / "landing"
    landing.mkdir()
    folders = Folders(str(tmp_path / "out"), str(tmp_path), str(tmp_path / "quarantine"), None)
    query = start_query(spark, str(tmp_path), timedelta(minutes=1))
    try:
        intake = None
        for number, part in enumerate([first, second, flush]):
            _write_csv(part, landing / f"sends-{number}.csv", BAD if number == 1 else "")
            if intake is None:
                opened = open_landing(spark, str(landing))
                root = os.path.join(str(tmp_path), "executors")
                intake = PlanIntake(opened, POLICY, [], root, folders.quarantine)
                feed = PlanFeed(str(landing), Reading("csv", settle=0.0), folders, query, intake)
            assert run_plans(feed, once=True) == 1
            assert intake.counts["quarantined"] == (2 if number == 1 else 0)
    finally:
        query.stop()
    got = answers(verdicts(spark, str(tmp_path)))
    valid = load_telemetry(spark, str(landing / "sends-0.csv")).valid
    valid = valid.unionByName(load_telemetry(spark, str(landing / "sends-1.csv")).valid)
    assert got == replayed(valid, POLICY)
    assert len(got) == len(incident)  # the send a day later waits for a later watermark
    (part,) = os.listdir(folders.quarantine)
    assert part == part_name(1)
    refused = pd.read_parquet(os.path.join(folders.quarantine, part))
    assert sorted(refused["message_id"]) == ["x", "y"]
    assert refused["source_file"].str.endswith("sends-1.csv").all()
    assert os.listdir(os.path.join(root, "read")) == ["plan-0000000002"]


def _write_csv(table: pd.DataFrame, path, more: str) -> None:
    table.to_csv(path, index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ")
    with open(path, "a") as out:
        out.write(more)
