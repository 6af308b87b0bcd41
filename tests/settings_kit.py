"""Documents and settings the entity-settings tests build: templates, az output, emulator
configs, and the shipped samples' expected policies."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from dedup_lib import DedupPolicy
from dedup_lib.settings.model import EntityConfigError, EntitySettings

NS = "Microsoft.ServiceBus/namespaces"
SERVICE_WORDING = "The value supplied must be between 00:00:20 and 7.00:00:00"
EMULATOR_WORDING = "The value supplied must be between 00:00:05 and 00:05:00"


def write(tmp_path: Path, doc: object, name: str = "entities.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


def template(*resources: dict, parameters: dict | None = None, **extra: object) -> dict:
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": parameters or {},
        "resources": list(resources),
        **extra,
    }


def namespace(sku: str | None = "Standard", name: str = "shop-sb", **extra: object) -> dict:
    body: dict = {"type": NS, "apiVersion": "2022-10-01-preview", "name": name, **extra}
    if sku is not None:
        body["sku"] = {"name": sku, "tier": sku}
    return body


def queue(name: str, kind: str = "queues", **properties: object) -> dict:
    return {
        "type": f"{NS}/{kind}",
        "apiVersion": "2022-10-01-preview",
        "name": name,
        "properties": properties,
    }


def settings(
    name: str = "orders",
    detection: bool = True,
    window: timedelta | None = None,
    partitioning: bool = False,
    source: str = "a.json: resources[1]",
    bounds: str = "service",
    tier: str | None = None,
) -> EntitySettings:
    return EntitySettings(
        name=name,
        kind="queue",
        requires_duplicate_detection=detection,
        window=window,
        partitioning=partitioning,
        requires_session=False,
        source=source,
        bounds=bounds,
        tier=tier,
    )


def raises(*fragments: str) -> pytest.RaisesExc[EntityConfigError]:
    """Expect an EntityConfigError whose message holds every fragment, in that order."""
    return pytest.raises(EntityConfigError, match=".*".join(re.escape(f) for f in fragments))


NAMESPACE_ID = "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/sb"


def az(name: str, kind: str = "Queues", **fields: object) -> dict:
    return {
        "id": f"{NAMESPACE_ID}/{kind.lower()}/{name}",
        "name": name,
        "type": f"Microsoft.ServiceBus/Namespaces/{kind}",
        **fields,
    }


def emulator(queues: list[dict], topics: list[dict] | None = None) -> dict:
    return {
        "UserConfig": {
            "Namespaces": [{"Name": "sbemulatorns", "Queues": queues, "Topics": topics or []}],
            "Logging": {"Type": "File"},
        }
    }


#: The entities of the shipped samples, and the policies of their production deployment.
DAY_ENTITIES = {"orders", "payments", "notifications", "inventory", "audit"}
PRODUCTION = {
    "orders": DedupPolicy("PT10M"),
    "payments": DedupPolicy("PT10M", partitioning=True),
    "notifications": DedupPolicy("PT5M"),
    "inventory": DedupPolicy("PT1H"),
    "audit": None,
}
