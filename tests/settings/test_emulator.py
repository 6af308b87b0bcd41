"""Entity settings from the Service Bus emulator's Config.json: its own bounds, no
partitioning."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dedup_lib import DedupPolicy
from dedup_lib.settings.load import load_entity_policies, load_entity_settings
from dedup_lib.settings.model import EntitySettings
from dedup_lib.telemetry.samples import sample_path
from settings_kit import DAY_ENTITIES, EMULATOR_WORDING, emulator, raises, settings, write


def test_emulator_config(tmp_path):
    doc = emulator(
        [
            {
                "Name": "queue.1",
                "Properties": {
                    "DeadLetteringOnMessageExpiration": False,
                    "DefaultMessageTimeToLive": "PT1H",
                    "DuplicateDetectionHistoryTimeWindow": "PT20S",
                    "LockDuration": "PT1M",
                    "MaxDeliveryCount": 3,
                    "RequiresDuplicateDetection": True,
                    "RequiresSession": True,
                },
            }
        ],
        [
            {
                "Name": "topic.1",
                "Properties": {"RequiresDuplicateDetection": False},
                "Subscriptions": [{"Name": "subscription.1", "Properties": {}}],
            }
        ],
    )
    path = write(tmp_path, doc, "Config.json")
    queue1, topic1 = load_entity_settings(path)
    assert queue1 == EntitySettings(
        name="queue.1",
        kind="queue",
        requires_duplicate_detection=True,
        window=timedelta(seconds=20),
        partitioning=False,
        requires_session=True,
        source=f"{path}: UserConfig.Namespaces[0].Queues[0]",
        bounds="emulator",
    )
    assert (topic1.kind, topic1.source) == ("topic", f"{path}: UserConfig.Namespaces[0].Topics[0]")
    assert load_entity_policies(path) == {
        "queue.1": DedupPolicy("PT20S", bounds="emulator"),
        "topic.1": None,
    }


def test_emulator_bounds(tmp_path):
    def one(window: str | None) -> Path:
        props: dict = {"RequiresDuplicateDetection": True}
        if window is not None:
            props["DuplicateDetectionHistoryTimeWindow"] = window
        return write(tmp_path, emulator([{"Name": "q", "Properties": props}]), "Config.json")

    assert load_entity_policies(one("PT5S")) == {"q": DedupPolicy("5s", bounds="emulator")}
    assert load_entity_policies(one("PT5M")) == {"q": DedupPolicy("5m", bounds="emulator")}
    with raises(
        "Config.json: UserConfig.Namespaces[0].Queues[0]: queue 'q'", "6m", EMULATOR_WORDING
    ):
        load_entity_settings(one("PT6M"))
    with raises("queue 'q'", "4s", EMULATOR_WORDING):
        load_entity_settings(one("PT4S"))
    with raises("queue 'q'", "10m (the default: no window given)", EMULATOR_WORDING):
        load_entity_settings(one(None))


def test_emulator_has_no_partitioning(tmp_path):
    doc = emulator([{"Name": "q", "Properties": {"EnablePartitioning": True}}])
    with raises(
        "Config.json", "queue 'q'", "EnablePartitioning true", "emulator has no partitioning"
    ):
        load_entity_settings(write(tmp_path, doc, "Config.json"))
    with raises("queue 'orders'", "emulator has no partitioning"):
        settings(partitioning=True, bounds="emulator")


def test_unreadable_duration_in_the_emulator_config(tmp_path):
    doc = emulator(
        [{"Name": "q", "Properties": {"DuplicateDetectionHistoryTimeWindow": "20 seconds"}}]
    )
    with raises("queue 'q'", 'DuplicateDetectionHistoryTimeWindow "20 seconds"', "ISO 8601"):
        load_entity_settings(write(tmp_path, doc))


def test_emulator_sample():
    path = sample_path("entities-emulator.json")
    assert {s.name for s in load_entity_settings(path)} == DAY_ENTITIES
    assert load_entity_policies(path) == {
        "orders": DedupPolicy("PT5M", bounds="emulator"),
        "payments": DedupPolicy("PT1M", bounds="emulator"),
        "notifications": DedupPolicy("PT2M", bounds="emulator"),
        "inventory": DedupPolicy("PT30S", bounds="emulator"),
        "audit": None,
    }
