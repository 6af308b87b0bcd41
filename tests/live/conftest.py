"""The live monitor's tests' shared scenario: the day sample paged through a real Prometheus
and Alertmanager (:func:`prometheus_kit.page_the_day`), built once for the tests that read
it (the rules', the Alertmanager's and the dashboard's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from prometheus_kit import PagedDay, page_the_day


@pytest.fixture(scope="session")
def paged_day(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PagedDay]:
    with page_the_day(spark, tmp_path_factory.mktemp("paged-day")) as paged:
        yield paged
