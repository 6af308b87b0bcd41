"""The cluster tests run only when asked (``make test`` and ``make test-cluster`` set
``DEDUP_TEST_CLUSTER``): they start a standalone Spark of three JVMs, which a bare ``pytest``
(a contributor's selection of tests) should not pay for.

One cluster serves every test here (one unit of the run, :data:`conftest.UNITS`). What the
cluster's results are compared with, the local runs, come first: nothing else runs while the
cluster does."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd
import pytest

from cluster_kit import FOLDER, INPUT, ROOT, Cluster, running, simulate_locally, verdicts_of
from dedup_lib import sample_path
from landing_kit import arrivals, day_sends, expected_late, first_hours

ASKED = os.environ.get("DEDUP_TEST_CLUSTER") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("cluster") is not None and not ASKED:
            item.add_marker(
                pytest.mark.skip(reason="a real Spark cluster: make test or make test-cluster")
            )


@dataclass(frozen=True)
class DayLanded:
    """Two hours of the day sample as they land (:mod:`landing_kit`): ``files`` in landing
    order, the ``late`` sends' event ids, the ``final`` watermark (micros), the entities'
    settings both runs use, and the local batch replay's ``verdicts`` of the on-time sends."""

    files: list[pd.DataFrame]
    late: set[int]
    final: int
    entities: str
    verdicts: pd.DataFrame


@dataclass(frozen=True)
class Local:
    """The local runs the cluster's are compared with: the incident's report and verdicts
    (``incident``), and the day scenario (``day``)."""

    incident: tuple[str, pd.DataFrame]
    day: DayLanded


@pytest.fixture(scope="session")
def _local() -> Local:
    """The local classic runs, before the cluster starts: the incident partitioned, and the
    day scenario's on-time sends with the entities' settings, in one child process."""
    sends = first_hours(day_sends(sample_path("day.parquet")))
    file_of = arrivals(sends)
    late, final = expected_late(sends, file_of)
    files = [sends[file_of == i] for i in range(int(file_of.max()) + 1)]
    on_time = FOLDER / "day" / "on-time.parquet"
    on_time.parent.mkdir(parents=True, exist_ok=True)
    sends[~sends["event_id"].isin(late)].to_parquet(on_time, index=False)
    entities = str(sample_path("entities-arm.json"))
    incident, day = "build/cluster/local/verdicts.parquet", "build/cluster/day/verdicts.parquet"
    report, _ = simulate_locally(
        (INPUT, ["--partitioning"], incident), (str(on_time), ["--entities", entities], day)
    )
    landed = DayLanded(files, late, final, entities, verdicts_of(ROOT / day))
    return Local((report, verdicts_of(ROOT / incident)), landed)


@pytest.fixture(scope="session")
def local(_local: Local) -> tuple[str, pd.DataFrame]:
    """The local classic run's report and verdicts of the incident (before the cluster starts)."""
    return _local.incident


@pytest.fixture(scope="session")
def day_landed(_local: Local) -> DayLanded:
    """The day scenario, with the local batch replay's verdicts (before the cluster starts)."""
    return _local.day


@pytest.fixture(scope="session")
def cluster(local: object, day_landed: object) -> Iterator[Cluster]:
    started = time.perf_counter()
    with running(FOLDER) as cluster:
        print(f"\ncluster started in {time.perf_counter() - started:.0f} s")
        yield cluster
