"""Entity settings from ``az servicebus queue show`` / ``topic show`` output, or the list
``az servicebus queue list`` / ``topic list`` prints."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dedup_lib.errors import excerpt
from dedup_lib.settings.model import (
    EntityConfigError,
    EntitySettings,
    as_json,
    lookup,
    read_mapping,
    read_name,
    service_entity,
)

_AZ_TYPES = {
    "microsoft.servicebus/namespaces/queues": "queue",
    "microsoft.servicebus/namespaces/topics": "topic",
}
_AZ_ID = re.compile(r"/namespaces/[^/]+/(queues|topics)/[^/]+$", re.IGNORECASE)


def az_kind(obj: Mapping[str, Any]) -> str | None:
    """``"queue"`` or ``"topic"`` from the object's ``type`` (or, without one, its ``id``);
    ``None`` for anything else, which is also how the format is recognised."""
    kind = lookup(obj, "type")
    if isinstance(kind, str):
        return _AZ_TYPES.get(kind.lower())
    ident = lookup(obj, "id")
    found = _AZ_ID.search(ident) if isinstance(ident, str) else None
    return None if found is None else found[1].lower()[:-1]


def read_az(doc: Any, path: str) -> list[EntitySettings]:
    """``az servicebus queue show`` / ``topic show`` objects, camelCase at the top level or,
    as some older CLI versions print them, under ``properties``."""
    items = list(enumerate(doc)) if isinstance(doc, list) else [(None, doc)]
    settings = []
    for index, obj in items:
        source = path if index is None else f"{path}: [{index}]"
        if not isinstance(obj, dict):
            raise EntityConfigError(
                f"{source}: expected a queue or topic object, got {as_json(obj)}"
            )
        kind = az_kind(obj)
        if kind is None:
            raise EntityConfigError(
                f"{source}: type {as_json(lookup(obj, 'type'))}: expected "
                "Microsoft.ServiceBus/Namespaces/Queues or Topics (the output of "
                "`az servicebus queue show` or `topic show`)"
            )
        name = read_name(lookup(obj, "name"), source, kind)
        where = f"{source}: {kind} {excerpt(name)}"
        nested = read_mapping(lookup(obj, "properties"), where, "properties")

        def value(
            key: str, obj: Mapping[str, Any] = obj, nested: Mapping[str, Any] = nested
        ) -> Any:
            found = lookup(obj, key)
            return lookup(nested, key) if found is None else found

        settings.append(service_entity(value, name, kind, where, source))
    return settings
