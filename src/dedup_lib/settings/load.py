"""Read entity settings from files, whatever the format, into the policies the replay takes.

Three formats (:data:`FORMATS`): Resource Manager templates (and Bicep compiled to JSON,
:mod:`.arm`), ``az servicebus queue show`` / ``topic show`` output (:mod:`.az`), and the
Service Bus emulator's ``Config.json`` (:mod:`.emulator`). Pure Python.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dedup_lib.rules.policy import DedupPolicy
from dedup_lib.settings.arm import read_arm
from dedup_lib.settings.az import az_kind, read_az
from dedup_lib.settings.emulator import read_emulator
from dedup_lib.settings.model import EntityConfigError, EntitySettings, entity_policies, lookup

#: The formats :func:`load_entity_settings` understands, as its errors name them.
FORMATS = (
    "a Resource Manager template or Bicep compiled to JSON (`resources` holding "
    "Microsoft.ServiceBus/namespaces/queues or topics)",
    "`az servicebus queue show` / `topic show` output (one object, or a list as "
    "`az servicebus queue list` prints; `type` Microsoft.ServiceBus/Namespaces/Queues or Topics)",
    "the Service Bus emulator's Config.json (`UserConfig.Namespaces[].Queues` and `Topics`)",
)

_Reader = Callable[[Any, str], list[EntitySettings]]


def load_entity_settings(path: str | Path) -> list[EntitySettings]:
    """Read one file of entity settings, detecting its format (:data:`FORMATS`), and check
    each entity the way the service would (see :meth:`EntitySettings.policy`)."""
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise EntityConfigError(f"{file}: cannot read it: {exc.strerror or exc}") from exc
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise EntityConfigError(
            f"{file}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            f"expected one of: {'; '.join(FORMATS)}"
        ) from None
    except ValueError as exc:
        raise EntityConfigError(f"{file}: not JSON text ({exc})") from None
    reader = _reader(doc)
    if reader is None:
        raise EntityConfigError(f"{file}: unknown format; expected one of: {'; '.join(FORMATS)}")
    settings = reader(doc, str(file))
    for entity in settings:
        entity.policy()
    return settings


def load_entity_policies(*paths: str | Path) -> dict[str, DedupPolicy | None]:
    """Load each file with :func:`load_entity_settings`, then
    :func:`~dedup_lib.settings.model.entity_policies` (one entity in several files must
    agree)."""
    return entity_policies(entity for path in paths for entity in load_entity_settings(path))


def _reader(doc: Any) -> _Reader | None:
    """The reader for a parsed document, or ``None`` for a format not understood."""
    if isinstance(doc, dict):
        if isinstance(lookup(doc, "UserConfig"), dict):
            return read_emulator
        if lookup(doc, "resources") is not None:
            return read_arm
        if az_kind(doc) is not None:
            return read_az
    if isinstance(doc, list) and (
        not doc or any(isinstance(item, dict) and az_kind(item) for item in doc)
    ):
        return read_az
    return None
