"""Entity settings from the Service Bus emulator's ``Config.json``
(``UserConfig.Namespaces[].Queues`` and ``Topics``): its own window bounds, no partitioning."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dedup_lib.errors import excerpt
from dedup_lib.settings.model import (
    DETECTION_KEY,
    SESSIONS_KEY,
    WINDOW_KEY,
    EntityConfigError,
    EntitySettings,
    lookup,
    read_duration,
    read_flag,
    read_list,
    read_mapping,
    read_name,
)


def read_emulator(doc: Any, path: str) -> list[EntitySettings]:
    """The emulator's ``Config.json``: every queue and topic of every namespace."""
    user = lookup(doc, "UserConfig")
    namespaces = read_list(lookup(user, "Namespaces"), path, "UserConfig.Namespaces")
    settings = []
    for i, namespace in enumerate(namespaces):
        at = f"UserConfig.Namespaces[{i}]"
        namespace = read_mapping(namespace, f"{path}: {at}", "namespace")
        for kind, key in (("queue", "Queues"), ("topic", "Topics")):
            for j, entity in enumerate(read_list(lookup(namespace, key), f"{path}: {at}", key)):
                source = f"{path}: {at}.{key}[{j}]"
                settings.append(_entity(read_mapping(entity, source, kind), kind, source))
    return settings


def _entity(entity: Mapping[str, Any], kind: str, source: str) -> EntitySettings:
    """One queue or topic of the emulator, labelled in messages as Config.json spells it."""
    name = read_name(lookup(entity, "Name"), source, kind)
    where = f"{source}: {kind} {excerpt(name)}"
    props = read_mapping(lookup(entity, "Properties"), where, "Properties")
    if read_flag(lookup(props, "EnablePartitioning"), where, "EnablePartitioning"):
        raise EntityConfigError(
            f"{where}: EnablePartitioning true: the Service Bus emulator has no "
            "partitioning; expected false or nothing"
        )
    return EntitySettings(
        name=name,
        kind=kind,
        requires_duplicate_detection=read_flag(
            lookup(props, DETECTION_KEY), where, "RequiresDuplicateDetection"
        ),
        window=read_duration(
            lookup(props, WINDOW_KEY), where, "DuplicateDetectionHistoryTimeWindow"
        ),
        partitioning=False,
        requires_session=read_flag(lookup(props, SESSIONS_KEY), where, "RequiresSession"),
        source=source,
        bounds="emulator",
    )
