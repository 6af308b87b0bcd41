"""DedupPolicy: window parsing, the service's bounds, and the key rule (SPEC sections 2, 4)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dedup_lib import DedupPolicy, parse_window
from dedup_lib.rules.policy import (
    REASON_KEY_MISMATCH,
    REASON_MISSING_TIME,
    effective_partition_key,
    parse_dedup_key,
    rejection_reasons,
    too_long_reason,
    uniqueness_key,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (timedelta(minutes=3), timedelta(minutes=3)),
        (90, timedelta(seconds=90)),
        (0.5, timedelta(milliseconds=500)),
        ("PT10M", timedelta(minutes=10)),
        ("pt20s", timedelta(seconds=20)),
        ("P7D", timedelta(days=7)),
        ("P1DT2H30M", timedelta(days=1, hours=2, minutes=30)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("P1W", timedelta(weeks=1)),
        ("90s", timedelta(seconds=90)),
        ("10m", timedelta(minutes=10)),
        ("2h", timedelta(hours=2)),
        ("7d", timedelta(days=7)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1h 30m", timedelta(hours=1, minutes=30)),
        ("250ms", timedelta(milliseconds=250)),
        ("0:10:00", timedelta(minutes=10)),
        ("7.00:00:00", timedelta(days=7)),
        ("00:00:20", timedelta(seconds=20)),
        ("600", timedelta(minutes=10)),
    ],
)
def test_parse_window(text, expected):
    assert parse_window(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "ten minutes", "10x", "m10", "-"])
def test_parse_window_rejects_nonsense_with_the_accepted_forms(text):
    with pytest.raises(ValueError, match="expected an ISO 8601 duration"):
        parse_window(text)


def test_parse_window_rejects_other_types():
    with pytest.raises(TypeError, match="window"):
        parse_window(True)
    with pytest.raises(TypeError, match="window"):
        parse_window([10])  # type: ignore[arg-type]


def test_default_policy_is_ten_minutes_without_partitioning():
    policy = DedupPolicy()
    assert policy.window == timedelta(minutes=10)
    assert policy.partitioning is False
    assert policy.window_micros == 600_000_000
    assert policy.describe() == "window 10m, partitioning disabled"


@pytest.mark.parametrize("window", ["PT20S", "P7D", "10m", 20, timedelta(days=7)])
def test_service_bounds_are_inclusive(window):
    DedupPolicy(window)


@pytest.mark.parametrize("window", ["19s", "PT19.999S", "P7DT1S", "8d"])
def test_outside_service_bounds_uses_the_service_wording(window):
    with pytest.raises(
        ValueError, match=r"The value supplied must be between 00:00:20 and 7\.00:00:00"
    ):
        DedupPolicy(window)


def test_emulator_bounds():
    DedupPolicy("5s", bounds="emulator")
    DedupPolicy("PT5M", bounds="emulator")
    with pytest.raises(ValueError, match="00:00:05 and 00:05:00"):
        DedupPolicy("6m", bounds="emulator")


def test_what_if_windows_need_the_opt_out():
    assert DedupPolicy("1s", bounds="none").window == timedelta(seconds=1)
    assert DedupPolicy("30d", bounds="none").window == timedelta(days=30)
    with pytest.raises(ValueError, match="positive"):
        DedupPolicy(0, bounds="none")
    with pytest.raises(ValueError, match="bounds"):
        DedupPolicy(bounds="cluster")  # type: ignore[arg-type]


def test_partitioning_must_be_a_bool():
    with pytest.raises(TypeError, match="partitioning"):
        DedupPolicy(partitioning="yes")  # type: ignore[arg-type]


def test_effective_partition_key_prefers_session_then_partition_key_then_message_id():
    assert effective_partition_key("m", "p", "s") == "s"
    assert effective_partition_key("m", "p", None) == "p"
    assert effective_partition_key("m", "p", "") == "p"
    assert effective_partition_key("m", "", None) == "m"


def test_uniqueness_key_by_mode():
    assert uniqueness_key("m", "p", "s", partitioning=False) == ("m",)
    assert uniqueness_key("m", "p", None, partitioning=True) == ("p", "m")
    assert parse_dedup_key('["p","m"]', partitioning=True) == ("p", "m")
    assert parse_dedup_key('["p","m"]', partitioning=False) == ('["p","m"]',)


def test_rejection_reasons():
    assert rejection_reasons(True, "m", None, None) == []
    assert rejection_reasons(True, "m", "a", "a") == []
    assert rejection_reasons(True, "m", "a", "") == []
    assert rejection_reasons(True, "m", "a", "b") == [REASON_KEY_MISMATCH]
    assert rejection_reasons(True, "x" * 128, None, None) == []
    assert rejection_reasons(False, "x" * 129, None, "s" * 129) == [
        REASON_MISSING_TIME,
        too_long_reason("MessageId"),
        too_long_reason("SessionId"),
    ]
