"""The cluster tests run only when asked (``make test`` and ``make test-cluster`` set
``DEDUP_TEST_CLUSTER``): they start a standalone Spark of three JVMs, which a bare ``pytest``
(a contributor's selection of tests) should not pay for."""

from __future__ import annotations

import os

import pytest

ASKED = os.environ.get("DEDUP_TEST_CLUSTER") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("cluster") is not None and not ASKED:
            item.add_marker(
                pytest.mark.skip(reason="a real Spark cluster: make test or make test-cluster")
            )
