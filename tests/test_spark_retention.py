"""What Spark's status store keeps of finished work is bounded (issue 70): the live monitor runs
a query every few seconds for weeks, and Spark's defaults (1,000 SQL queries with their plans,
1,000 jobs and stages, 100,000 tasks; every read's file listing until 250 MB of them) grew its
JVM's heap for hours (benchmarks/bench_soak.py)."""

from __future__ import annotations

import pytest

from dedup_lib.spark.session import LOCAL_DEFAULTS

BOUNDS = {
    "spark.sql.ui.retainedExecutions": 100,
    "spark.ui.retainedJobs": 100,
    "spark.ui.retainedStages": 100,
    "spark.ui.retainedTasks": 10_000,
    # Seconds a read's listing stays in the shared file status cache (no later read uses it).
    "spark.sql.metadataCacheTTLSeconds": 300,
}


def test_the_defaults_bound_what_the_status_store_keeps():
    for key, bound in BOUNDS.items():
        assert 0 < int(LOCAL_DEFAULTS[key]) <= bound, key


@pytest.mark.spark
def test_a_session_keeps_the_latest_queries_only(spark):
    """The settings reach the running JVM, and its SQL store drops the oldest queries."""
    from dedup_lib.spark import is_connect

    if is_connect(spark):
        pytest.skip("a Connect server keeps its own settings")
    conf = spark.sparkContext.getConf()
    for key, bound in BOUNDS.items():
        assert 0 < int(conf.get(key)) <= bound, key
    store = spark._jsparkSession.sharedState().statusStore()
    retained = BOUNDS["spark.sql.ui.retainedExecutions"]
    for _ in range(retained + 20 - min(store.executionsCount(), retained)):
        spark.range(1).collect()
    # The listener trims on its own thread, as queries end: the count settles at the bound.
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    assert store.executionsCount() <= retained
