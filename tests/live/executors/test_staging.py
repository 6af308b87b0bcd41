"""A plan's micro-batch pass written by Spark for the executors: the same valid sends, keyed,
and the same quarantined rows as the driver's pass brings into the driver, every record read
counted once; a pass whose written rows are not the records it counted is refused."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from dedup_lib import DedupPolicy
from dedup_lib.columns import KEYED_CONTENT, SEND_MICROS, WINDOW
from dedup_lib.errors import DedupLibError
from dedup_lib.live.executors.staging import stage_pass
from dedup_lib.live.intake.micro_batch import load_micro_batch, plan_micro_batch
from dedup_lib.telemetry.landing import open_landing

pytestmark = [pytest.mark.spark, pytest.mark.connect]

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


def test_the_written_pass_is_the_driver_s_pass(spark, tmp_path):
    landing_folder = tmp_path / "landing"
    landing_folder.mkdir()
    (landing_folder / "sends.csv").write_text(CSV)
    landing = open_landing(spark, str(landing_folder))
    paths, content = [str(landing_folder / "sends.csv")], ["payload_hash"]

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


def test_rows_that_are_not_the_records_counted_are_refused(spark, tmp_path):
    landing_folder = tmp_path / "landing"
    landing_folder.mkdir()
    (landing_folder / "sends.csv").write_text(CSV)
    landing = open_landing(spark, str(landing_folder))
    run = plan_micro_batch(landing, [str(landing_folder / "sends.csv")], {}, POLICY, [], 0)

    class Inflated:  # the pass's Observation, one record more than Spark wrote
        @property
        def get(self):
            return {**run.seen.get, "read": 6, "valid": 5}

    with pytest.raises(DedupLibError, match="rows would be lost in the micro-batch written"):
        stage_pass(dataclasses.replace(run, seen=Inflated()), str(tmp_path / "written"))
