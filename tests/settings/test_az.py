"""Entity settings from `az servicebus queue show` / `topic show` / `list` output."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.settings.load import load_entity_policies, load_entity_settings
from dedup_lib.settings.model import EntitySettings
from dedup_lib.telemetry.samples import sample_path
from settings_kit import DAY_ENTITIES, PRODUCTION, az, raises, write


def test_az_show_single_object(tmp_path):
    path = write(
        tmp_path,
        az(
            "orders",
            requiresDuplicateDetection=True,
            duplicateDetectionHistoryTimeWindow="PT10M",
            enablePartitioning=True,
            requiresSession=True,
        ),
        "orders.json",
    )
    [orders] = load_entity_settings(path)
    assert orders == EntitySettings(
        name="orders",
        kind="queue",
        requires_duplicate_detection=True,
        window=timedelta(minutes=10),
        partitioning=True,
        requires_session=True,
        source=str(path),
        bounds="service",
    )


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("PT10M", timedelta(minutes=10)),
        ("0:10:00", timedelta(minutes=10)),
        ("00:00:20", timedelta(seconds=20)),
        ("7.00:00:00", timedelta(days=7)),
        ("7 days, 0:00:00", timedelta(days=7)),
        ("1 day, 2:30:00", timedelta(days=1, hours=2, minutes=30)),
        ("P7D", timedelta(days=7)),
    ],
)
def test_az_duration_forms(tmp_path, text, window):
    path = write(
        tmp_path,
        az("orders", requiresDuplicateDetection=True, duplicateDetectionHistoryTimeWindow=text),
    )
    [orders] = load_entity_settings(path)
    assert orders.window == window
    assert load_entity_policies(path) == {"orders": DedupPolicy(window)}


def test_az_list_of_queues_and_topics(tmp_path):
    path = write(
        tmp_path,
        [
            az(
                "orders",
                requiresDuplicateDetection=True,
                duplicateDetectionHistoryTimeWindow="0:05:00",
            ),
            az(
                "events",
                "Topics",
                requiresDuplicateDetection=False,
                duplicateDetectionHistoryTimeWindow="0:10:00",
            ),
        ],
        "list.json",
    )
    orders, events = load_entity_settings(path)
    assert (orders.kind, orders.source) == ("queue", f"{path}: [0]")
    assert (events.kind, events.source, events.window) == (
        "topic",
        f"{path}: [1]",
        timedelta(minutes=10),
    )
    assert load_entity_policies(path) == {"orders": DedupPolicy("5m"), "events": None}


def test_az_older_cli_nests_properties(tmp_path):
    obj = az("orders")
    obj["properties"] = {
        "requiresDuplicateDetection": True,
        "duplicateDetectionHistoryTimeWindow": "0:02:00",
        "enablePartitioning": True,
    }
    [orders] = load_entity_settings(write(tmp_path, [obj]))
    assert (orders.requires_duplicate_detection, orders.window, orders.partitioning) == (
        True,
        timedelta(minutes=2),
        True,
    )


def test_az_kind_from_the_id_when_type_is_missing(tmp_path):
    obj = az("events", "Topics", requiresDuplicateDetection=True)
    del obj["type"]
    [events] = load_entity_settings(write(tmp_path, obj))
    assert events.kind == "topic"


def test_az_empty_list_is_no_entities(tmp_path):
    assert load_entity_settings(write(tmp_path, [])) == []


def test_az_list_with_something_else_in_it(tmp_path):
    subscription = az("all", "Topics/Subscriptions")
    path = write(tmp_path, [az("orders"), subscription], "mixed.json")
    with raises(
        "mixed.json: [1]", "Microsoft.ServiceBus/Namespaces/Topics/Subscriptions", "expected"
    ):
        load_entity_settings(path)


def test_az_entity_without_a_name(tmp_path):
    obj = az("orders")
    obj["name"] = ""
    with raises("nameless.json", "queue name", "expected the entity's name"):
        load_entity_settings(write(tmp_path, obj, "nameless.json"))


def test_az_sample():
    path = sample_path("entities-az.json")
    found = {s.name: s for s in load_entity_settings(path)}
    assert set(found) == DAY_ENTITIES
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    assert any(o["duplicateDetectionHistoryTimeWindow"] == "0:10:00" for o in raw)
    assert load_entity_policies(path) == PRODUCTION
