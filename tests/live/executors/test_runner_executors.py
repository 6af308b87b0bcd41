"""``watch_duplicates`` with the state on the executors, end to end: the incident sample landed
and judged once, a restart with the same checkpoint judging nothing again and the rest when a
later send moves the watermark, each send with the batch replay's verdict, the resends
counted those the batch analysis finds; a checkpoint of the other mode refused."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dedup_lib import (
    DedupPolicy,
    StateOptions,
    WatchOptions,
    load_telemetry,
    missed_resends,
    sample_path,
    watch_duplicates,
)
from dedup_lib.errors import InputError
from dedup_lib.live.executors import counts
from dedup_lib.live.executors.query import ExecutorsQuery
from dedup_lib.live.executors.runner import ExecutorsRunner
from dedup_lib.live.output.lines import RESENDS, VERDICTS
from executors_kit import answers, replayed, stored, verdicts

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


@pytest.mark.connect
@pytest.mark.usefixtures("spread_keys")
def test_the_incident_is_judged_once_with_the_replay_s_verdicts_across_a_restart(
    spark, tmp_path, monkeypatch
):
    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(sample_path("incident.parquet"), landing)

    # The first run's last resends are the stop's to alert, as when a service manager stops it
    with monkeypatch.context() as patched:
        patched.setattr(ExecutorsRunner, "settle", _settle_leaving_to_stop(look=True))
        first = _watch(spark, tmp_path)
    assert _alerted(first, "resend") == _resends_among(spark, tmp_path / "out") > 100
    assert first.loaded["read"] == 29_872
    assert sum(line.judged for line in first.lines) == 29_719  # 153 wait for the watermark
    assert all(line.state.executors for line in first.lines)
    # the state stores' size, as Spark reports it once a micro-batch's state is committed
    sizes = first.counters().query("metric == 'dedup_state_bytes'")
    assert dict(zip(sizes["labels"], sizes["value"], strict=True))["store=disk"] > 0
    # the anchors and waiting sends the judge counted: those in its state store
    assert _held(first) == _stored(spark, tmp_path)
    assert _held(first)[1] == 153
    counted = _counted(first)
    assert counted["dedup_rows_read_total"] == 29_872
    judges = [line for line in first.lines if line.stream == VERDICTS]
    assert counted["dedup_micro_batches_total"] == len(judges) + 1  # the timers' own
    # every alert counted is in a line: the resends in the lines of their own query
    resends = [line for line in first.lines if line.stream == RESENDS]
    assert {a["kind"] for line in resends for a in line.found} == {"resend"}
    assert sum(line.alerts for line in first.lines) == _alerted(first)
    _assert_counts_the_verdicts(counted, tmp_path / "out")
    again = _watch(spark, tmp_path)
    assert again.loaded["micro_batches"] == 0
    assert len(verdicts(spark, str(tmp_path))) == 29_719
    assert _counted(again) == counted, "a restart's counters go on from the records"
    assert _held(again) == _stored(spark, tmp_path)

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
    assert _counted(last)["dedup_rows_read_total"] == 29_873
    assert _held(last) == _stored(spark, tmp_path) == (0, 1), "every window closed; one waits"
    _assert_counts_the_verdicts(_counted(last), tmp_path / "out")
    got = answers(verdicts(spark, str(tmp_path)))
    assert got == replayed(load_telemetry(spark, str(landing / "incident.parquet")).valid, POLICY)
    # the resends, paired by a query of their own (payload_hash compared, within an hour)
    assert _alerted(last, "resend") == _resends_among(spark, tmp_path / "out") > 100


def test_a_query_s_failure_at_the_stop_is_raised_once_what_was_written_is_counted(
    spark, tmp_path, monkeypatch
):
    landing = tmp_path / "landing"
    landing.mkdir()
    # the incident's first twenty minutes: some twenty contents sent again under new ids
    incident = pq.read_table(sample_path("incident.parquet")).sort_by("send_time")
    start = incident.slice(0, 3000)
    pq.write_table(start, landing / "start.parquet", use_deprecated_int96_timestamps=True)
    stop = ExecutorsQuery.stop

    def failing(self: ExecutorsQuery) -> None:
        stop(self)
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(ExecutorsRunner, "settle", _settle_leaving_to_stop(look=False))
    monkeypatch.setattr(ExecutorsQuery, "stop", failing)
    with pytest.raises(RuntimeError, match="the disk is full"):
        _watch(spark, tmp_path)
    # the resends the second query wrote were paired by the stop, not left to the next start
    _, resent = counts.latest(str(tmp_path / "ck" / "executors"), counts.RESENDS)
    assert sum(resent.alerts.values()) == _resends_among(spark, tmp_path / "out") > 0


def _settle_leaving_to_stop(look: bool) -> Callable[[ExecutorsRunner], None]:
    """ExecutorsRunner.settle without its last look at what the resends' query wrote; with
    ``look`` False, without the look before the resends' query settles either (the one that
    starts that query), so that the stop pairs every resend."""

    def settle(self: ExecutorsRunner) -> None:
        self.query.settle()
        self._count_written()
        resends = self._pair_resends() if look else self.resends
        if resends is not None:
            resends.settle()

    return settle


def _resends_among(spark, out) -> int:
    """The resends among the verdicts written in ``out`` (payload_hash within an hour)."""
    judged = spark.read.parquet(*map(str, sorted(out.glob("batch-*"))))
    return missed_resends(judged).where("delay <= 3600").count()


def _held(watch) -> tuple[int, int]:
    """The state's anchors and waiting sends, as the monitor serves them."""
    table = watch.counters().set_index("metric")["value"]
    return int(table["dedup_state_keys"]), int(table["dedup_waiting_sends"])


def _stored(spark, tmp_path) -> tuple[int, int]:
    """The anchors and waiting sends in the judge's state store after its last micro-batch."""
    return stored(spark, str(tmp_path / "ck" / "executors" / "spark"))


def _counted(watch) -> dict[str, float]:
    """The counters' sums by metric, and the judged sends' by verdict."""
    table = watch.counters()
    table = table[table["metric"].str.endswith("_total")]
    found = table.groupby("metric")["value"].sum().to_dict()
    judged = table[table["metric"] == "dedup_sends_judged_total"]
    for labels, value in zip(judged["labels"], judged["value"], strict=True):
        verdict = dict(p.split("=", 1) for p in labels.split(", "))["verdict"]
        found[f"judged {verdict}"] = found.get(f"judged {verdict}", 0) + value
    return found


def _alerted(watch, kind: str | None = None) -> float:
    """The alerts its counters counted, of ``kind`` (None: of every kind)."""
    table = watch.counters()
    alerts = table[table["metric"] == "dedup_alerts_total"]
    if kind is not None:
        alerts = alerts[alerts["labels"].str.contains(f"kind={kind}")]
    return float(alerts["value"].sum())


def _assert_counts_the_verdicts(counted: dict[str, float], out) -> None:
    """Each verdict counted as often as the verdicts' files hold it."""
    written = pd.read_parquet(out)["verdict"].value_counts().to_dict()
    got = {k.removeprefix("judged "): v for k, v in counted.items() if k.startswith("judged ")}
    assert {k: v for k, v in got.items() if v} == written


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
