"""synth.frame, the generator (``generate_telemetry``): its statistics follow its parameters,
its ground truth is consistent, and the same seed gives the same rows on any number of
partitions. Its scenarios' checks are tests/synth/test_scenario.py's, its plans
tests/synth/test_plan.py's."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, missed_resends
from dedup_lib.analysis.diagnostics import MISS_PARTITION_KEY
from dedup_lib.synth import (
    ACK_LOST_RETRY,
    CAUSES,
    CONSTANT_ID,
    FIRST,
    MALFORMED_TIMES,
    REPLAY,
    RESTART_RESEND,
    SYNTH_COLUMNS,
    Scenario,
    Sender,
    generate_telemetry,
    plan_telemetry,
)
from dedup_lib.telemetry.write import write_telemetry

START = datetime(2026, 3, 2, tzinfo=UTC)
BUSINESS = Sender(
    "shop", ("q1", "q2"), 0.5, "order", "business", ack_loss=0.1, crashes_per_day=20,
    unacked=10, restart_median=120, restart_sigma=0.6, replays_per_day=4, replay_batch=50,
    session_share=0.5, sessions=300, partition_key_share=0.8, key_mismatch_share=0.1,
    scheduled_share=0.2, scheduled_max_delay=1800,
)  # fmt: skip
STATS = Scenario(
    START,
    timedelta(days=1),
    (
        BUSINESS,
        Sender("mailer", ("mail",), 0.2, "mail", "guid_per_attempt", ack_loss=0.2),
        Sender("legacy", ("q1",), 0.1, "legacy", "constant", ack_loss=0.0),
        Sender("stock", ("stock",), 0.1, "stock", "reused", reused_pool=7, ack_loss=0.05),
        Sender("billing", ("bills",), 0.05, "bill", "guid_per_message", ack_loss=0.05),
        Sender("audit", ("audit",), 0.05, "audit", "none", ack_loss=0.05),
    ),
    quiet_hours=(0, 6),
    quiet_factor=0.2,
    bursts_per_day=0,
    malformed=0.01,
)
ROWS = 40_000


@pytest.fixture(scope="module")
def sends(spark: object) -> pd.DataFrame:
    frame = generate_telemetry(spark, ROWS, seed=11, scenario=STATS)  # type: ignore[arg-type]
    pdf: pd.DataFrame = frame.toPandas()
    pdf["time"] = pd.to_datetime(pdf["send_time"], errors="coerce", format="ISO8601", utc=True)
    return pdf


def _firsts(sends: pd.DataFrame) -> pd.DataFrame:
    firsts = sends[sends.attempt == 1][["logical_id", "time"]]
    return firsts.rename(columns={"time": "first_time"})


@pytest.mark.connect
def test_columns_and_identity(sends: pd.DataFrame) -> None:
    assert tuple(c for c in sends.columns if c != "time") == SYNTH_COLUMNS
    assert sends.event_id.is_unique
    assert set(sends.cause) <= set(CAUSES)
    assert abs(len(sends) - ROWS) < 0.03 * ROWS


def test_attempts_are_numbered_in_time_order(sends: pd.DataFrame) -> None:
    ordered = sends.sort_values("event_id")
    per_message = ordered.groupby("logical_id")
    assert (per_message.attempt.diff().dropna() == 1).all()
    assert (per_message.attempt.min() == 1).all()
    assert ((sends.attempt == 1) == (sends.cause == FIRST)).all()
    # send times as generated (before malformed text): event order is time order
    timed = ordered.dropna(subset=["time"])
    gaps = timed.groupby("logical_id").time.diff().dropna()
    assert (gaps >= pd.Timedelta(0)).all()


def test_ground_truth_is_consistent(sends: pd.DataFrame) -> None:
    per_message = sends.groupby("logical_id")
    assert (per_message.payload_hash.nunique() == 1).all()
    assert (per_message.sender.nunique() == 1).all()
    assert (per_message.entity.nunique() == 1).all()
    assert (per_message.partition_key.nunique(dropna=False) == 1).all()
    assert (per_message.session_id.nunique(dropna=False) == 1).all()
    firsts = sends[sends.attempt == 1]
    assert firsts.payload_hash.is_unique


def test_id_policies(sends: pd.DataFrame) -> None:
    by = {name: frame for name, frame in sends.groupby("sender")}
    shop = by["shop"].groupby("logical_id").message_id
    assert (shop.nunique() == 1).all()
    assert by["shop"].message_id.str.fullmatch(r"\d+\.2026/order").all()
    assert (by["billing"].groupby("logical_id").message_id.nunique() == 1).all()
    assert by["billing"].drop_duplicates("logical_id").message_id.is_unique
    guid = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}"
    assert by["mailer"].message_id.str.fullmatch(guid).all()
    assert by["mailer"].message_id.is_unique
    assert (by["legacy"].message_id == CONSTANT_ID).all()
    assert by["stock"].message_id.nunique() == 7
    assert by["audit"].message_id.isna().all()


def test_lost_acknowledgements_follow_the_chance_and_the_backoff(sends: pd.DataFrame) -> None:
    plan = plan_telemetry(ROWS, 11, STATS)
    for sender_plan in plan.senders:
        sender = sender_plan.sender
        mine = sends[sends.sender == sender.name]
        retries = int((mine.cause == ACK_LOST_RETRY).sum())
        p = sender.ack_loss
        expected = sender_plan.count * sum(p**r for r in range(1, sender.max_retries + 1))
        # R = number of retries; Var(R) <= E[R^2]
        spread = math.sqrt(
            sender_plan.count * sum((2 * r - 1) * p**r for r in range(1, sender.max_retries + 1))
        )
        assert abs(retries - expected) <= 5 * spread + 1, (sender.name, retries, expected)
    # gaps between a send and its next retry: base * 2^(n-1), within the jitter
    garbled = sends[sends.time.isna()].logical_id
    chain = sends[sends.cause.isin([FIRST, ACK_LOST_RETRY]) & ~sends.logical_id.isin(garbled)]
    chain = chain.sort_values("event_id")
    chain["gap"] = chain.groupby("logical_id").time.diff().dt.total_seconds()
    chain["n"] = chain.groupby("logical_id").cumcount()
    retries = chain[(chain.cause == ACK_LOST_RETRY) & (chain.sender == "shop")]
    base, jitter = BUSINESS.retry_base, BUSINESS.retry_jitter
    for n, gaps in retries.groupby("n").gap:
        nominal = min(base * 2 ** (n - 1), BUSINESS.retry_max)
        assert gaps.between(nominal * (1 - jitter) - 1e-6, nominal * (1 + jitter) + 1e-6).all()
        if len(gaps) > 100:
            assert abs(gaps.mean() - nominal) < 0.05 * nominal


def test_crashes_and_replays_resend_what_the_plan_says(sends: pd.DataFrame) -> None:
    plan = plan_telemetry(ROWS, 11, STATS)
    shop = next(p for p in plan.senders if p.sender.name == "shop")
    crashes = [e for e in shop.events if e[0] == RESTART_RESEND]
    assert len(crashes) == 20
    assert plan.resends(RESTART_RESEND) == 20 * BUSINESS.unacked
    assert plan.resends(REPLAY) == 4 * BUSINESS.replay_batch
    assert (sends.cause == RESTART_RESEND).sum() == plan.resends(RESTART_RESEND)
    assert (sends.cause == REPLAY).sum() == plan.resends(REPLAY)
    delays = np.log([delay for _, _, delay in crashes])
    assert abs(delays.mean() - math.log(BUSINESS.restart_median)) < 3 * 0.6 / math.sqrt(20)
    # resends come after their first send: restarts by the restart delay (at least 5 s),
    # replays hours later (at least replay_min)
    later = sends.merge(_firsts(sends), on="logical_id").dropna(subset=["time", "first_time"])
    wait = (later.time - later.first_time).dt.total_seconds()
    assert (wait[later.cause == RESTART_RESEND] >= 5).all()
    assert (wait[later.cause == REPLAY] >= BUSINESS.replay_min).all()
    assert wait[later.cause == REPLAY].median() > 3600


def test_sessions_partition_keys_and_schedules(sends: pd.DataFrame) -> None:
    shop = sends[(sends.sender == "shop") & (sends.attempt == 1)]
    n = len(shop)
    with_session = shop.session_id.notna()
    assert abs(with_session.mean() - 0.5) < 5 * math.sqrt(0.25 / n)
    assert shop.session_id.dropna().nunique() <= BUSINESS.sessions
    keyed = shop[with_session & shop.partition_key.notna()]
    mismatched = (keyed.partition_key != keyed.session_id).mean()
    expected_keyed = 0.5 * 0.8
    assert abs(len(keyed) / n - expected_keyed) < 5 * math.sqrt(0.25 / n)
    assert abs(mismatched - 0.1) < 5 * math.sqrt(0.09 / len(keyed))
    scheduled = shop.scheduled_enqueue_time.notna()
    assert abs(scheduled.mean() - 0.2) < 5 * math.sqrt(0.16 / n)
    later = shop[scheduled].dropna(subset=["time"])
    ahead = (pd.to_datetime(later.scheduled_enqueue_time, utc=True) - later.time).dt.total_seconds()
    assert ahead.between(60 - 1e-6, 60 + BUSINESS.scheduled_max_delay + 1e-6).all()
    assert sends[sends.sender != "shop"].scheduled_enqueue_time.isna().all()


def test_quiet_hours_carry_less_traffic(sends: pd.DataFrame) -> None:
    firsts = sends[sends.attempt == 1].dropna(subset=["time"])
    hours = firsts.time.dt.hour
    quiet = (hours < 6).sum() / 6
    busy = (hours >= 6).sum() / 18
    assert abs(quiet / busy - STATS.quiet_factor) < 0.03


@pytest.mark.connect
def test_malformed_times_are_quarantined_by_the_loader(
    spark: object, sends: pd.DataFrame, tmp_path: object
) -> None:
    bad = sends.send_time.isin(MALFORMED_TIMES)
    assert abs(bad.mean() - 0.01) < 5 * math.sqrt(0.01 / len(sends))
    assert sends.time.isna().sum() == bad.sum()
    path = f"{tmp_path}/sends.parquet"
    frame = generate_telemetry(spark, ROWS, seed=11, scenario=STATS)  # type: ignore[arg-type]
    write_telemetry(frame, path)
    loaded = load_telemetry(spark, path)  # type: ignore[arg-type]
    assert loaded.counts() == {
        "read": len(sends),
        "valid": int((~bad).sum()),
        "quarantined": int(bad.sum()),
        "skipped": 0,
    }


def test_mismatched_keys_are_rejected_and_constant_ids_dropped(spark: object) -> None:
    frame = generate_telemetry(spark, 8_000, seed=3, scenario=STATS).where(  # type: ignore[arg-type]
        "send_time NOT IN ('', 'not a time', '2026-02-30T25:61:00Z', 'yesterday 14:00')"
    )
    frame = frame.withColumn("send_time", frame.send_time.cast("timestamp"))
    result = detect_duplicates(frame, DedupPolicy("PT10M")).toPandas()
    keyed = result.partition_key.notna() & result.session_id.notna()
    mismatched = keyed & (result.partition_key != result.session_id)
    assert mismatched.any()
    assert (result[mismatched].verdict == "rejected").all()
    legacy = result[result.sender == "legacy"]
    # one id for every message: at most one accepted per 10-minute window of the day
    assert (legacy.verdict == "accepted").sum() <= 24 * 6 + 1
    assert (legacy.verdict == "duplicate").sum() > len(legacy) / 2


BATCHING = Scenario(
    START,
    timedelta(hours=6),
    (
        Sender("invoices", ("q1", "q2"), 0.5, "invoice", "guid_per_message", ack_loss=0.1,
               crashes_per_day=8, unacked=10, replays_per_day=8, replay_batch=30,
               replay_min=600, replay_median=1800, batch_size=5),
        Sender("refunds", ("q1",), 0.3, "refund", "business", ack_loss=0.1, session_share=1.0,
               sessions=50, partition_key_share=1.0, batch_size=3),
        Sender("single", ("q1",), 0.2, "single", "business", ack_loss=0.1),
    ),
    bursts_per_day=0,
)  # fmt: skip


def test_batching_senders_send_and_retry_whole_batches(spark: object) -> None:
    frame = generate_telemetry(spark, 4_000, seed=8, scenario=BATCHING)  # type: ignore[arg-type]
    sends = frame.withColumn("send_time", frame.send_time.cast("timestamp")).persist()
    pdf = sends.toPandas()
    sizes = {"invoices": 5, "refunds": 3}
    called = pdf.cause.isin([FIRST, ACK_LOST_RETRY])
    assert pdf[~called | (pdf.sender == "single")].batch_id.isna().all()
    batched = pdf[called & pdf.sender.isin(sizes)]
    assert batched.batch_id.notna().all()
    calls = batched.groupby("batch_id").agg(
        sender=("sender", "first"),
        size=("logical_id", "size"),
        first=("logical_id", "min"),
        last=("logical_id", "max"),
        attempts=("attempt", "nunique"),
        **{c: (c, "nunique") for c in ("send_time", "entity", "session_id", "partition_key")},
    )
    # One call: consecutive messages, one time, entity, session and key, one attempt each.
    assert (calls["size"] <= calls.sender.map(sizes)).all()
    assert (calls["size"] == calls["last"] - calls["first"] + 1).all()
    assert (calls[["send_time", "entity", "attempts"]] == 1).all().all()
    assert (calls.loc[calls.sender == "refunds", ["session_id", "partition_key"]] == 1).all().all()
    # A lost acknowledgement: the whole batch again, under a new batch_id.
    retried = batched[batched.cause == ACK_LOST_RETRY]
    assert len(retried) > 50
    per_message = batched.groupby("logical_id").batch_id.agg(["size", "nunique"])
    assert (per_message["size"] == per_message["nunique"]).all()
    retry_calls = retried.groupby("batch_id").logical_id.apply(frozenset)
    first_calls = batched[batched.cause == FIRST].groupby("batch_id").logical_id.apply(frozenset)
    assert set(retry_calls) <= set(first_calls)
    # Both kinds of batch carry distinct MessageIds: refused with partitioning, not without.
    for partitioning in (False, True):
        result = detect_duplicates(sends, DedupPolicy("PT10M", partitioning=partitioning))
        verdicts = result.where("batch_id IS NOT NULL").groupBy("verdict").count().collect()
        counts = {r["verdict"]: r["count"] for r in verdicts}
        if partitioning:
            several = batched.batch_id.map(calls["size"]) > 1
            assert counts.get("rejected") == several.sum() > 0
        else:
            assert "rejected" not in counts
    sends.unpersist()


REKEYING = Scenario(
    START,
    timedelta(hours=6),
    (
        Sender("shipping", ("q1",), 0.4, "shipment", "business", ack_loss=0.1,
               crashes_per_day=8, unacked=10, partition_key_share=1.0, partition_keys=60,
               retry_rekey_share=1.0, resend_rekey_share=1.0),
        Sender("payouts", ("q1",), 0.4, "payout", "business", ack_loss=0.1, crashes_per_day=8,
               unacked=10, session_share=1.0, sessions=50, partition_key_share=1.0,
               resend_rekey_share=1.0),
        Sender("single", ("q1",), 0.2, "single", "business", ack_loss=0.1, crashes_per_day=8,
               partition_key_share=1.0),
    ),
    bursts_per_day=0,
)  # fmt: skip


def _effective_key(pdf: pd.DataFrame) -> pd.Series:
    """SPEC section 2: SessionId, else PartitionKey, else MessageId."""
    return pdf.session_id.fillna(pdf.partition_key).fillna(pdf.message_id)


def test_rekeying_senders_resend_under_another_partition_key(spark: object) -> None:
    frame = generate_telemetry(spark, 4_000, seed=4, scenario=REKEYING)  # type: ignore[arg-type]
    sends = frame.withColumn("send_time", frame.send_time.cast("timestamp")).persist()
    pdf = sends.toPandas()
    pdf["key"] = _effective_key(pdf)
    first = pdf[pdf.attempt == 1].set_index("logical_id")
    later = pdf[pdf.attempt > 1]
    original = first.loc[later.logical_id]
    same_id = later.message_id.to_numpy() == original.message_id.to_numpy()
    same_key = later.key.to_numpy() == original.key.to_numpy()
    same_content = later.payload_hash.to_numpy() == original.payload_hash.to_numpy()
    assert same_id.all()
    assert same_content.all()
    rekeyed = {
        "shipping": later.cause.isin([ACK_LOST_RETRY, RESTART_RESEND]).to_numpy(),
        "payouts": (later.cause == RESTART_RESEND).to_numpy(),
        "single": np.zeros(len(later), dtype=bool),
    }
    for sender, expected in rekeyed.items():
        mine = (later.sender == sender).to_numpy()
        assert mine.sum() > 20
        assert (~same_key[mine & expected]).all()
        assert same_key[mine & ~expected].all()
    assert (~same_key).sum() > 100
    payouts = later[later.sender == "payouts"]
    assert (payouts.partition_key == payouts.session_id).all()
    assert later[later.sender == "shipping"].session_id.isna().all()
    # Without partitioning a rekeyed resend inside the window is a duplicate; with it, it is
    # not, and the miss is attributed to the partition key.
    judged = {
        mode: detect_duplicates(sends, DedupPolicy("PT1H", partitioning=mode))
        for mode in (False, True)
    }
    verdicts = {p: result.toPandas().set_index("event_id").verdict for p, result in judged.items()}
    moved = later[~same_key].event_id
    assert (verdicts[False].loc[moved] == "duplicate").mean() > 0.95
    assert (verdicts[True].loc[moved] == "accepted").all()
    misses = missed_resends(judged[True]).toPandas().set_index("event_id")
    assert (misses.loc[moved].miss_cause == MISS_PARTITION_KEY).mean() > 0.95
    sends.unpersist()


@pytest.mark.connect
def test_same_seed_same_rows_on_any_partitioning(spark: object) -> None:
    def rows(partitions: int, seed: int = 5) -> pd.DataFrame:
        frame = generate_telemetry(  # type: ignore[arg-type]
            spark, 3_000, seed=seed, scenario=STATS, partitions=partitions
        )
        pdf: pd.DataFrame = frame.toPandas()
        return pdf.sort_values("event_id").reset_index(drop=True)

    one = rows(1)
    pd.testing.assert_frame_equal(one, rows(7))
    assert not one.equals(rows(1, seed=6))
