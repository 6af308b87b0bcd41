"""analysis.totals: the time buckets of the counts over time, in whole seconds, refused under a
second before Spark starts."""

from __future__ import annotations

import pytest

from dedup_lib.analysis.totals import bucket_seconds
from dedup_lib.errors import InputError


@pytest.mark.parametrize(("bucket", "seconds"), [("PT1M", 60), ("10m", 600), ("1d", 86_400)])
def test_bucket_seconds(bucket: str, seconds: int) -> None:
    assert bucket_seconds(bucket) == seconds


@pytest.mark.parametrize("bucket", ["0", "PT0S", "0.5s", "-5"])
def test_a_bucket_under_a_second_is_refused_before_spark(bucket: str) -> None:
    with pytest.raises(InputError, match="bucket"):
        bucket_seconds(bucket)
