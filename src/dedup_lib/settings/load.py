"""Read entity settings from files, whatever the format, into the policies the replay takes.

Three formats (:data:`FORMATS`): Resource Manager templates (and Bicep compiled to JSON,
:mod:`.arm`), ``az servicebus queue show`` / ``topic show`` output (:mod:`.az`), and the
Service Bus emulator's ``Config.json`` (:mod:`.emulator`). Pure Python.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dedup_lib.errors import excerpt, printable
from dedup_lib.rules.policy import DedupPolicy
from dedup_lib.settings.arm import read_arm
from dedup_lib.settings.az import az_kind, read_az
from dedup_lib.settings.emulator import read_emulator
from dedup_lib.settings.model import EntityConfigError, EntitySettings, entity_policies, lookup

#: The formats :func:`load_entity_settings` understands, as its errors name them.
FORMATS = (
    "a Resource Manager template (or compiled Bicep) declaring Service Bus queues or topics",
    "`az servicebus queue show` (or topic, list) output",
    "the Service Bus emulator's Config.json",
)
#: Larger files are refused unread: a template is at most 4 MB, and ``az`` lists of every
#: entity of a namespace stay well below this.
MAX_FILE_BYTES = 64 * 1024 * 1024

_Reader = Callable[[Any, str], list[EntitySettings]]


def load_entity_settings(path: str | Path) -> list[EntitySettings]:
    """Read one file of entity settings, detecting its format (:data:`FORMATS`), and check
    each entity the way the service would (see :meth:`EntitySettings.policy`).

    JSON in UTF-8 (with or without a BOM), UTF-16 or UTF-32 (as Windows PowerShell writes).
    Anything else raises :class:`EntityConfigError` naming the file: no file or not a file,
    over :data:`MAX_FILE_BYTES`, empty, not text, not JSON, nested too deeply, or not a
    format understood.
    """
    file = Path(path)
    name = printable(str(file))
    expected = f"expected one of: {'; '.join(FORMATS)}"
    raw = _read(file, name)
    if not raw.strip() or raw in (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        raise EntityConfigError(f"{name}: the file is empty; {expected}")
    try:
        doc = json.loads(raw, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        raise EntityConfigError(
            f"{name}: the key {excerpt(exc.key)} appears twice in one object, with "
            "nothing to say which counts; expected each key once"
        ) from None
    except json.JSONDecodeError as exc:
        raise EntityConfigError(
            f"{name}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {expected}"
        ) from None
    except UnicodeDecodeError as exc:
        raise EntityConfigError(
            f"{name}: not text (byte {exc.object[exc.start : exc.start + 1]!r} at offset "
            f"{exc.start:,} is not {exc.encoding}); expected JSON in UTF-8 or UTF-16"
        ) from None
    except RecursionError:
        raise _too_deep(name) from None
    except ValueError as exc:
        raise EntityConfigError(f"{name}: not JSON ({excerpt(str(exc), 100)})") from None
    reader = _reader(doc)
    if reader is None:
        found = f"a JSON {_JSON_TYPES.get(type(doc), type(doc).__name__)}"
        raise EntityConfigError(f"{name}: unknown format ({found}); {expected}")
    try:
        settings = reader(doc, name)
        for entity in settings:
            entity.policy()
    except RecursionError:
        raise _too_deep(name) from None
    return settings


def _read(file: Path, name: str) -> bytes:
    """The file's bytes, at most :data:`MAX_FILE_BYTES` of them."""
    try:
        with file.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise EntityConfigError(
            f"{name}: cannot read it: {exc.strerror or exc}; expected a settings file"
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise EntityConfigError(
            f"{name}: larger than {MAX_FILE_BYTES // 1024 // 1024} MB, more than any settings "
            "file holds; expected a template, `az` output or Config.json"
        )
    return raw


class _DuplicateKeyError(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when it names a key twice: readers disagree on which counts."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return obj


def _too_deep(name: str) -> EntityConfigError:
    return EntityConfigError(
        f"{name}: nested too deeply (arrays and objects inside each other hundreds of levels "
        "deep) to be a settings file; expected a template, `az` output or Config.json"
    )


_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def load_entity_policies(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> dict[str, DedupPolicy | None]:
    """The duplicate-detection policy of each entity, from exports of their settings.

    Each file is read with :func:`load_entity_settings` (an ARM template or export, ``az
    servicebus`` output, the emulator's config), then
    :func:`~dedup_lib.settings.model.entity_policies`.

    Parameters
    ----------
    paths : str, os.PathLike, or an iterable of them
        The settings file, or files; one entity in several files must agree.

    Returns
    -------
    dict[str, DedupPolicy or None]
        Entity name to its policy, None where detection is off: what
        :func:`dedup_lib.detect_duplicates` takes as ``policy``.

    Raises
    ------
    InputError
        A file that is none of those formats, or entities that disagree (named).

    Examples
    --------
    >>> from dedup_lib import load_entity_policies, sample_path
    >>> policies = load_entity_policies(sample_path("entities-arm.json"))
    >>> sorted(policies)
    ['audit', 'inventory', 'notifications', 'orders', 'payments']
    >>> policies["payments"]
    DedupPolicy(window=datetime.timedelta(seconds=600), partitioning=True, bounds='service')
    >>> policies["audit"] is None  # detection off on the entity
    True
    """
    several = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    return entity_policies(
        entity for path in several for entity in load_entity_settings(os.fspath(path))
    )


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
