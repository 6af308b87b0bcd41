"""EntitySettings and entity_policies: the checks the service would make, whichever file the
settings come from, and one entity described twice (SPEC.md section 4)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.settings.load import load_entity_policies, load_entity_settings
from dedup_lib.settings.model import EntityConfigError, EntitySettings, as_json, entity_policies
from settings_kit import SERVICE_WORDING, az, queue, raises, settings, template, write

VALID_FIELDS = {
    "name": "orders",
    "kind": "queue",
    "requires_duplicate_detection": True,
    "window": None,
    "partitioning": False,
    "requires_session": False,
    "source": "a.json",
    "bounds": "service",
}


@pytest.mark.parametrize("window", ["PT19S", "P7DT1S", "P8D", "PT0S", "0:00:10"])
def test_window_outside_service_bounds(tmp_path, window):
    doc = template(
        queue(
            "shop-sb/orders",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow=window,
        )
    )
    path = write(tmp_path, doc, "bounds.json")
    with raises(
        "bounds.json: resources[0]: queue 'orders'",
        "duplicateDetectionHistoryTimeWindow",
        SERVICE_WORDING,
    ):
        load_entity_settings(path)


@pytest.mark.parametrize("window", ["PT20S", "P7D", "7.00:00:00"])
def test_window_at_the_service_bounds(tmp_path, window):
    path = write(
        tmp_path,
        az("orders", requiresDuplicateDetection=True, duplicateDetectionHistoryTimeWindow=window),
    )
    assert load_entity_policies(path)["orders"] == DedupPolicy(window)


def test_window_given_while_detection_is_off_is_ignored(tmp_path):
    doc = template(
        queue(
            "shop-sb/orders",
            requiresDuplicateDetection=False,
            duplicateDetectionHistoryTimeWindow="P30D",
        )
    )
    path = write(tmp_path, doc)
    [orders] = load_entity_settings(path)
    assert orders.window == timedelta(days=30)
    assert load_entity_policies(path) == {"orders": None}


@pytest.mark.parametrize(
    ("value", "shown"),
    [("yes", '"yes"'), ("true", '"true"'), (1, "1"), ({"value": True}, '{"value": true}')],
)
def test_non_boolean_detection_flag(tmp_path, value, shown):
    path = write(tmp_path, [az("orders", requiresDuplicateDetection=value)], "flags.json")
    with raises(
        "flags.json: [0]: queue 'orders'",
        f"requiresDuplicateDetection {shown}",
        "expected true or false",
    ):
        load_entity_settings(path)


@pytest.mark.parametrize("window", ["T10M", "10m", "ten minutes", "PT", "600", 600, True, "-PT10M"])
def test_unreadable_duration(tmp_path, window):
    path = write(
        tmp_path,
        [az("orders", requiresDuplicateDetection=True, duplicateDetectionHistoryTimeWindow=window)],
        "durations.json",
    )
    with raises(
        "durations.json: [0]: queue 'orders'",
        f"duplicateDetectionHistoryTimeWindow {json.dumps(window)}",
        "expected an ISO 8601 duration such as PT10M",
    ):
        load_entity_settings(path)


def test_entity_settings_policy():
    assert settings(window=None).policy() == DedupPolicy(timedelta(minutes=10))
    assert settings(window=timedelta(hours=2), partitioning=True).policy() == DedupPolicy(
        "2h", partitioning=True
    )
    assert settings(detection=False, window=timedelta(days=30)).policy() is None
    assert settings(window=timedelta(minutes=1), bounds="emulator").policy() == DedupPolicy(
        "1m", bounds="emulator"
    )
    with raises("a.json: resources[1]: queue 'orders'", "8d", SERVICE_WORDING):
        settings(window=timedelta(days=8)).policy()
    with raises("queue 'orders'", "Basic tier"):
        settings(tier="Basic").policy()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kind": "subscription"}, "expected 'queue' or 'topic'"),
        ({"bounds": "none"}, "expected 'service' or 'emulator'"),
        ({"name": ""}, "expected a non-empty name"),
        ({"requires_session": "no"}, "requiresSession 'no': expected true or false"),
        ({"window": "PT10M"}, "expected a timedelta or None"),
    ],
)
def test_entity_settings_refuses_nonsense(changes, message):
    fields = {**VALID_FIELDS, **changes}
    with raises(message):
        EntitySettings(**fields)


def test_identical_duplicates_are_fine():
    first = settings(window=timedelta(minutes=10), source="a.json: resources[1]")
    again = settings(window=None, source="b.json: [0]")
    off = settings(
        "audit", detection=False, window=timedelta(minutes=1), source="a.json: resources[2]"
    )
    off_again = settings("audit", detection=False, window=timedelta(days=2), source="b.json: [1]")
    assert entity_policies([first, off, again, off_again]) == {
        "orders": DedupPolicy("10m"),
        "audit": None,
    }


def test_detection_cannot_differ():
    with raises(
        "entity 'orders'",
        "requiresDuplicateDetection is true in a.json: resources[1]",
        "but false in b.json: [0]",
        "duplicate detection cannot be changed after an entity is created",
    ):
        entity_policies([settings(), settings(detection=False, source="b.json: [0]")])


def test_partitioning_cannot_differ():
    with raises(
        "entity 'orders'",
        "enablePartitioning is false in a.json: resources[1]",
        "but true in b.json: [0]",
        "partitioning cannot be changed after an entity is created",
    ):
        entity_policies([settings(), settings(partitioning=True, source="b.json: [0]")])
    with raises("partitioning cannot be changed"):
        entity_policies(
            [settings(detection=False), settings(detection=False, partitioning=True, source="b")]
        )


def test_different_windows_are_ambiguous():
    with raises(
        "entity 'orders'",
        "duplicateDetectionHistoryTimeWindow is 10m (the default) in a.json: resources[1]",
        "but 5m in b.json: [0]",
        "ambiguous",
    ):
        entity_policies([settings(), settings(window=timedelta(minutes=5), source="b.json: [0]")])


def test_entity_policies_validates_each_entity():
    with raises("queue 'orders'", SERVICE_WORDING):
        entity_policies([settings(window=timedelta(seconds=5))])


@pytest.mark.parametrize(
    ("changes", "shown"),
    [
        ({"name": 7}, "entity name '7'"),
        ({"name": "q" * 1_000_000, "kind": "blob"}, "(1,000,000 characters): kind"),
        ({"bounds": "\x1b[2J" * 1000}, "bounds '\\x1b[2J"),
        ({"requires_session": "y" * 1_000_000}, "requiresSession 'yyyy"),
        ({"window": "P99999999999D"}, "duplicateDetectionHistoryTimeWindow 'P99999999999D'"),
    ],
)
def test_entity_settings_quote_bad_fields_short(changes, shown):
    fields = {**VALID_FIELDS, **changes}
    with pytest.raises(EntityConfigError) as caught:
        EntitySettings(**fields)
    assert shown in str(caught.value)
    assert len(str(caught.value)) < 300
    assert "\x1b" not in str(caught.value)


def test_a_timespan_out_of_range_keeps_its_reason(tmp_path):
    path = write(
        tmp_path,
        [
            az(
                "orders",
                requiresDuplicateDetection=True,
                duplicateDetectionHistoryTimeWindow="25:00:00",
            )
        ],
        "az.json",
    )
    with raises("az.json: [0]: queue 'orders'", "'25:00:00' is not a TimeSpan", "hours 0-23"):
        load_entity_settings(path)


def test_as_json_cuts_long_values():
    assert as_json("PT10M") == '"PT10M"'
    assert as_json({"value": True}) == '{"value": true}'
    long = as_json(["x"] * 100_000)
    assert long.startswith('\'["x", ')
    assert long.endswith("(500,000 characters)")
    assert len(long) < 100
