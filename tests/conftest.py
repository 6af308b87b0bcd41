"""One Spark session per test run, and each Spark test on both kinds of session.

Tests that take the ``spark`` fixture run twice: on a classic local session, then on a local
Spark Connect server. pytest groups tests by the session-scoped parameter, so the classic
session is stopped before the Connect one starts (one process cannot hold both).
``SPARK_REMOTE`` set in the environment runs only the Connect pass, against that server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from dedup_lib import get_spark

settings.register_profile(
    "default",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=60)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=500)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
)

TEST_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "3",
    "spark.driver.memory": "2g",
}
MODES = ["connect"] if os.environ.get("SPARK_REMOTE") else ["classic", "connect"]


@pytest.fixture(scope="session", params=MODES)
def spark(request: pytest.FixtureRequest) -> Iterator[object]:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    if request.param == "classic":
        session = get_spark("dedup-tests", master="local[2]", config=TEST_CONFIG)
    else:
        remote = os.environ.get("SPARK_REMOTE", "local[2]")
        session = get_spark("dedup-tests", remote=remote, config=TEST_CONFIG)
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        only = item.get_closest_marker("classic_only")
        callspec = getattr(item, "callspec", None)
        if only is not None and callspec is not None and callspec.params.get("spark") == "connect":
            why = only.kwargs.get("covered_by") or (only.args[0] if only.args else "")
            if not why:
                raise pytest.UsageError(f"{item.nodeid}: classic_only needs covered_by=...")
            item.add_marker(pytest.mark.skip(reason=f"classic pass only; Connect: {why}"))
