"""DedupPolicy: window parsing, the service's bounds, and the key rule (SPEC sections 2, 4)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.errors import InputError, InputTypeError
from dedup_lib.rules.durations import MAX_WINDOW, parse_window
from dedup_lib.rules.policy import (
    REASON_KEY_MISMATCH,
    REASON_MISSING_TIME,
    REASON_MIXED_BATCH,
    batch_is_mixed,
    batch_rule_applies,
    check_policies,
    dedup_key_of,
    effective_partition_key,
    parse_dedup_key,
    rejection_reasons,
    too_long_reason,
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
    assert policy.window_us == 600_000_000
    assert policy.describe() == "window 10m, partitioning disabled"


def test_window_micros_is_window_us_under_its_former_name_and_warns():
    policy = DedupPolicy("PT20S")
    with pytest.warns(DeprecationWarning, match="window_us"):
        assert policy.window_micros == policy.window_us == 20_000_000


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


def test_dedup_key_of_by_mode():
    assert dedup_key_of("m", "p", "s", partitioning=False) == ("m",)
    assert dedup_key_of("m", "p", None, partitioning=True) == ("p", "m")
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


@pytest.mark.parametrize(
    ("members", "mixed"),
    [
        ([("m", "p", "s"), ("m", "p", "s")], False),
        ([("m", None, None), ("m", "", "")], False),  # empty is not set: both unset, shared
        ([("m", "p", None), ("m", "p", "")], False),
        ([("m", "p", None), ("n", "p", None)], True),  # MessageId differs
        ([("m", "p", None), ("m", "q", None)], True),  # PartitionKey differs
        ([("m", None, "s"), ("m", None, "t")], True),  # SessionId differs
        ([("m", "p", None), ("m", None, None)], True),  # set and not set differ
        ([("m", None, "s"), ("m", None, "")], True),
        ([("m", None, None), ("", None, None)], True),
        ([(None, None, None), (None, None, None)], True),  # each gets a fresh MessageId
        ([(None, "p", None)], False),  # a call of one message always shares
        ([], False),
    ],
)
def test_batch_is_mixed(members, mixed):
    assert batch_is_mixed(members) is mixed


def test_batch_rule_applies_only_with_partitioning_and_detection():
    assert batch_rule_applies(DedupPolicy(partitioning=True))
    assert not batch_rule_applies(DedupPolicy(partitioning=False))
    assert not batch_rule_applies(None)
    assert not batch_rule_applies("unknown")


def test_mixed_batch_reason_comes_last():
    assert rejection_reasons(True, "m", None, None, mixed_batch=True) == [REASON_MIXED_BATCH]
    assert rejection_reasons(False, "m", "a", "b", mixed_batch=True) == [
        REASON_MISSING_TIME,
        REASON_KEY_MISMATCH,
        REASON_MIXED_BATCH,
    ]


@pytest.mark.parametrize("bounds", ["service", "emulator", "none"])
@pytest.mark.parametrize(
    ("window", "shown"),
    [
        ("inf", "'inf'"),
        (float("nan"), "'nan'"),
        (10**30, "'1000000000000000000000000000000'"),
        ("P99999999999D", "'P99999999999D'"),
        ("99999999999999w", "'99999999999999w'"),
        ("99999999999.00:00:00", "'99999999999.00:00:00'"),
        ("0:99:99", "'0:99:99'"),
        (-5, "'-5'"),
        ("-5", "'-5'"),
        (timedelta.max, "'999999999 days, 23:59:59.999999'"),
        (timedelta(seconds=-5), "'-1 day, 23:59:55'"),
        ("x" * 20_000_000, "'xxxxxxxxxx"),
    ],
)
def test_policy_refuses_hostile_windows_whatever_the_bounds(window, shown, bounds):
    with pytest.raises(InputError) as caught:
        DedupPolicy(window, bounds=bounds)
    message = str(caught.value)
    assert message.startswith("window: ")
    assert shown in message
    assert len(message) < 300


def test_what_if_windows_may_reach_the_longest_timespan():
    assert DedupPolicy(MAX_WINDOW, bounds="none").window == MAX_WINDOW
    with pytest.raises(InputError, match=r"too long.*7 days"):
        DedupPolicy(MAX_WINDOW + timedelta(microseconds=1), bounds="none")


@pytest.mark.parametrize(
    ("kwargs", "error", "shown"),
    [
        ({"partitioning": "y" * 10_000}, InputTypeError, "'yyyy"),
        ({"bounds": ["service"]}, InputError, "'['service']'"),
        ({"bounds": "\x1b[31mservice"}, InputError, "'\\x1b[31mservice'"),
        ({"bounds": "s" * 10_000}, InputError, "(10,000 characters)"),
    ],
)
def test_policy_refuses_other_arguments_clearly(kwargs, error, shown):
    with pytest.raises(error) as caught:
        DedupPolicy(**kwargs)
    assert shown in str(caught.value)
    assert len(str(caught.value)) < 300
    assert "\x1b" not in str(caught.value)


def test_check_policies_quotes_names_and_values_short():
    with pytest.raises(InputTypeError, match=r"entity names must be text, got '\(1, 2\)'"):
        check_policies({(1, 2): None})  # type: ignore[dict-item]
    with pytest.raises(InputTypeError) as caught:
        check_policies({"q\x1b" * 1000: "z" * 1_000_000})  # type: ignore[dict-item]
    message = str(caught.value)
    assert "q\\x1b" in message
    assert "got str 'zzz" in message
    assert len(message) < 300
