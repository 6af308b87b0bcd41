"""The JVM kernel: built once per source, clear errors where it cannot be built, a fallback to
the Python kernel with a warning, and a single evaluation per send in sort order."""

from __future__ import annotations

import zipfile

import pytest
from pyspark.sql import functions as F

from dedup_lib import DedupLibWarning, DedupPolicy, detect_duplicates
from dedup_lib.replay import engine
from dedup_lib.replay.kernels import jvm
from dedup_lib.testing import Message
from replay_kit import at, engine_verdicts, frame, oracle_verdicts

TEN_MIN = DedupPolicy("10m")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEDUP_LIB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_jar_is_built_once_and_named_by_its_source(cache, tmp_path, monkeypatch):
    jar = jvm.jar_path()
    assert jar.parent == cache
    with zipfile.ZipFile(jar) as archive:
        assert "dedup_lib/Replay.class" in archive.namelist()
    built = jar.stat().st_mtime_ns
    assert jvm.jar_path() == jar
    assert jar.stat().st_mtime_ns == built

    edited = tmp_path / "Replay.java"
    edited.write_text(jvm.SOURCE.read_text() + "\n// edited\n")
    monkeypatch.setattr(jvm, "SOURCE", edited)
    assert jvm.jar_path() != jar


def test_missing_javac_says_what_to_install(cache, monkeypatch):
    monkeypatch.setattr(jvm, "_javac", lambda: None)
    with pytest.raises(jvm.JvmKernelUnavailable, match=r"no `javac`.*install a JDK 17"):
        jvm.jar_path()


def test_unwritable_cache_is_named(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("DEDUP_LIB_CACHE", str(tmp_path / "a-file" / "cache"))
    with pytest.raises(jvm.JvmKernelUnavailable, match=r"cannot write .*a-file.*DEDUP_LIB_CACHE"):
        jvm.jar_path()


def test_compile_error_names_the_source_and_shows_javac(cache, tmp_path, monkeypatch):
    broken = tmp_path / "Replay.java"
    broken.write_text("package dedup_lib; public final class Replay { oops }")
    monkeypatch.setattr(jvm, "SOURCE", broken)
    with pytest.raises(jvm.JvmKernelUnavailable, match=r"failed on .*Replay\.java[\s\S]*error"):
        jvm.jar_path()
    assert not list(cache.glob("*.jar"))


@pytest.mark.connect
def test_unknown_kernel_is_refused(spark):
    df = frame(spark, [Message("a", at(0), event_id=0)])
    with pytest.raises(ValueError, match="kernel: expected one of auto, jvm, python, got 'java'"):
        detect_duplicates(df, TEN_MIN, kernel="java")  # type: ignore[arg-type]


@pytest.mark.connect
def test_auto_falls_back_to_python_with_a_warning(spark, cache, monkeypatch):
    monkeypatch.setattr(jvm, "_javac", lambda: None)
    monkeypatch.setattr(engine, "_warned", set())
    messages = [Message("a", at(i * 100), event_id=i) for i in range(10)]
    with pytest.raises(jvm.JvmKernelUnavailable, match="javac"):
        engine_verdicts(spark, messages, TEN_MIN, kernel="jvm")
    with pytest.warns(DedupLibWarning, match=r"Python replay kernel .* because no `javac`"):
        answers = engine_verdicts(spark, messages, TEN_MIN, kernel="auto")
    assert answers == oracle_verdicts(messages, TEN_MIN)


# The kernel keeps state from one send to the next: Spark must evaluate it once per send, in
# the sort's order, even when a filter on its answer could be pushed below it.
@pytest.mark.parametrize("kernel", ["jvm", "python"])
@pytest.mark.parametrize("verdict", ["accepted", "duplicate"])
def test_a_filter_on_the_result_sees_the_same_verdicts(spark, kernel, verdict):
    messages = [Message(f"k{i % 2}", at(i * 130), event_id=i) for i in range(40)]
    result = detect_duplicates(frame(spark, messages), TEN_MIN, kernel=kernel)
    expected = [v.original for v in oracle_verdicts(messages, TEN_MIN) if v.verdict == verdict]
    rows = result.filter(F.col("verdict") == verdict).orderBy("row").collect()
    assert [r["original_event_id"] for r in rows] == expected


# The JVM kernel hands the event id through as an object: every orderable type comes back as
# it went in, the same as from the Python kernel.
@pytest.mark.parametrize(
    "event_id",
    [
        "concat('e-', cast(event_id as string))",
        "cast(event_id as decimal(20, 2))",
        "timestamp_seconds(event_id)",
        "named_struct('n', event_id, 's', 'x')",
        "array(cast(event_id as int))",
    ],
    ids=["string", "decimal", "timestamp", "struct", "array"],
)
def test_event_ids_of_any_type_come_back_unchanged(spark, event_id):
    messages = [Message(f"k{i % 3}", at(i * 100), event_id=i) for i in range(30)]
    df = frame(spark, messages).withColumn("event_id", F.expr(event_id))
    answers = {
        kernel: detect_duplicates(df, TEN_MIN, kernel=kernel)
        .select("row", "verdict", "original_send_time", "original_event_id")
        .orderBy("row")
        .collect()
        for kernel in ("jvm", "python")
    }
    assert answers["jvm"] == answers["python"]
    oracle = oracle_verdicts(messages, TEN_MIN)
    assert [r["verdict"] for r in answers["jvm"]] == [v.verdict for v in oracle]
    duplicates = [r for r in answers["jvm"] if r["verdict"] == "duplicate"]
    assert duplicates
    assert all(r["original_event_id"] is not None for r in duplicates)


def test_a_failed_build_is_not_tried_again(cache, tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    javac = tmp_path / "javac"
    javac.write_text(f"#!/bin/sh\necho run >> {calls}\necho 'error: no' >&2\nexit 1\n")
    javac.chmod(0o755)
    monkeypatch.setattr(jvm, "_javac", lambda: str(javac))
    monkeypatch.setattr(jvm, "_failed", {})
    for _ in range(2):
        with pytest.raises(jvm.JvmKernelUnavailable, match="error: no"):
            jvm.jar_path()
    assert calls.read_text().splitlines() == ["run"]


@pytest.mark.connect
def test_auto_with_a_jdk_warns_nothing(spark, recwarn):
    messages = [Message("a", at(i * 100), event_id=i) for i in range(10)]
    assert engine_verdicts(spark, messages, TEN_MIN, kernel="auto") == oracle_verdicts(
        messages, TEN_MIN
    )
    assert not [w for w in recwarn if "replay kernel" in str(w.message)]


@pytest.mark.connect
def test_a_session_that_cannot_register_falls_back(spark, monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("functions are disabled here")

    loaded = jvm._sessions.get(spark)
    if loaded is not None:
        monkeypatch.setattr(loaded, "names", set())
    monkeypatch.setattr(type(spark.udf), "registerJavaFunction", refuse)
    monkeypatch.setattr(engine, "_warned", set())
    messages = [Message("a", at(i * 100), event_id=i) for i in range(10)]
    with pytest.raises(jvm.JvmKernelUnavailable, match=r"could not register.*disabled here"):
        engine_verdicts(spark, messages, TEN_MIN, kernel="jvm")
    with pytest.warns(DedupLibWarning, match=r"Python replay kernel.*disabled here"):
        answers = engine_verdicts(spark, messages, TEN_MIN, kernel="auto")
    assert answers == oracle_verdicts(messages, TEN_MIN)


# The original's time crosses back from microseconds: before 1970 too, to the microsecond.
@pytest.mark.connect
def test_times_before_1970_come_back_exactly(spark):
    from datetime import UTC, datetime, timedelta

    t0 = datetime(1969, 12, 31, 23, 59, 58, 999_999, tzinfo=UTC)
    messages = [
        Message("a", t0 + timedelta(microseconds=k * 250_001), event_id=k) for k in range(10)
    ]
    assert engine_verdicts(spark, messages, TEN_MIN) == oracle_verdicts(messages, TEN_MIN)


# A Spark Connect plan finds its function by name only when it runs: a later result with
# another event id type registers another function and leaves the earlier one alone.
@pytest.mark.connect
def test_an_earlier_result_still_runs_after_another_event_id_type(spark):
    messages = [Message(f"k{i % 2}", at(i * 100), event_id=i) for i in range(12)]
    df = frame(spark, messages)
    first = detect_duplicates(df, TEN_MIN, kernel="jvm")
    later = detect_duplicates(
        df.withColumn("event_id", F.col("event_id").cast("string")), TEN_MIN, kernel="jvm"
    )
    later_ids = [r["original_event_id"] for r in later.orderBy("row").collect()]
    first_ids = [r["original_event_id"] for r in first.orderBy("row").collect()]
    assert later_ids == [None if i is None else str(i) for i in first_ids]
    assert first_ids == [v.original for v in oracle_verdicts(messages, TEN_MIN)]


# Two results in one task (a cross join without an exchange between them) share the
# function's object: each must still start its own stream with no anchor.
@pytest.mark.connect
def test_a_cross_join_of_two_results_keeps_each_verdict(spark):
    messages = [Message("hot", at(i * 100), event_id=i) for i in range(8)]
    result = detect_duplicates(frame(spark, messages), TEN_MIN, kernel="jvm")
    alone = [(r["row"], r["verdict"]) for r in result.select("row", "verdict").collect()]
    left = result.select(F.col("row").alias("l_row"), F.col("verdict").alias("l_verdict"))
    right = result.select(F.col("row").alias("r_row"), F.col("verdict").alias("r_verdict"))
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        pairs = left.crossJoin(right).collect()
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    assert len(pairs) == len(messages) ** 2
    assert {(r["l_row"], r["l_verdict"]) for r in pairs} == set(alone)
    assert {(r["r_row"], r["r_verdict"]) for r in pairs} == set(alone)
