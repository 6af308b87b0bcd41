"""Every test here spreads keys over several shuffle partitions: what it checks must hold
however the keys are spread, not only with all of them in one partition."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _spread(spread_keys: None) -> None:
    """The run's ``spread_keys`` for each test here."""
