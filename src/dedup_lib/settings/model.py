"""An entity's duplicate-detection settings, validated the way Service Bus would (docs/rules.md,
section 4), and the value helpers every reader uses, so that the three formats refuse bad
values with the same messages.

:class:`EntitySettings` is what each reader yields; :func:`entity_policies` turns them into the
per-entity :class:`~dedup_lib.rules.policy.DedupPolicy` mapping the replay takes. Pure Python.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dedup_lib.errors import InputError, excerpt
from dedup_lib.rules.durations import format_window, parse_azure_window
from dedup_lib.rules.policy import (
    DEFAULT_WINDOW,
    WINDOW_BOUNDS,
    Bounds,
    DedupPolicy,
)

_KINDS = ("queue", "topic")
_BOUNDS: dict[str, Bounds] = {"service": "service", "emulator": "emulator"}

#: Property names as Resource Manager and ``az`` write them (matched without regard to case).
DETECTION_KEY = "requiresDuplicateDetection"
WINDOW_KEY = "duplicateDetectionHistoryTimeWindow"
PARTITIONING_KEY = "enablePartitioning"
SESSIONS_KEY = "requiresSession"

_DURATION_FORMS = (
    "an ISO 8601 duration such as PT10M or P7D (or a TimeSpan such as 0:10:00 or 7.00:00:00, "
    "as older az versions print)"
)


class EntityConfigError(InputError):
    """An entity's settings cannot be read, or the service would refuse them."""


def as_json(value: object, limit: int = 60) -> str:
    """A value as it appears in the file, for messages: its JSON text (control characters
    escaped by JSON itself), or past ``limit`` characters an :func:`~dedup_lib.errors.excerpt`
    of it, so that a value of megabytes gives a one-line message."""
    try:
        text = json.dumps(value, default=repr)
    except (RecursionError, ValueError):
        return f"a JSON {type(value).__name__} too large to show"
    return text if len(text) <= limit else excerpt(text, limit)


@dataclass(frozen=True)
class EntitySettings:
    """One queue's or topic's duplicate-detection settings, as configured.

    ``name`` is the short entity name, as the telemetry's ``entity`` column holds it.
    ``window`` is ``None`` when the configuration leaves it out. ``source`` says where the
    settings came from (file and locator), ``bounds`` which window limits apply (``"service"``
    or ``"emulator"``), ``tier`` the namespace SKU when the file says it.
    """

    name: str
    kind: str
    requires_duplicate_detection: bool
    window: timedelta | None
    partitioning: bool
    requires_session: bool
    source: str
    bounds: str
    tier: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise EntityConfigError(
                f"{self.source}: entity name {excerpt(self.name)}: expected a non-empty name"
            )
        if self.kind not in _KINDS:
            raise EntityConfigError(f"{self._where}: kind: expected 'queue' or 'topic'")
        if self.bounds not in _BOUNDS:
            raise EntityConfigError(
                f"{self._where}: bounds {excerpt(self.bounds)}: expected 'service' or 'emulator'"
            )
        for label, flag in (
            (DETECTION_KEY, self.requires_duplicate_detection),
            (PARTITIONING_KEY, self.partitioning),
            (SESSIONS_KEY, self.requires_session),
        ):
            if not isinstance(flag, bool):
                raise EntityConfigError(
                    f"{self._where}: {label} {excerpt(flag)}: expected true or false"
                )
        if self.window is not None and not isinstance(self.window, timedelta):
            raise EntityConfigError(
                f"{self._where}: {WINDOW_KEY} {excerpt(self.window)}: expected a timedelta or None"
            )
        if self.bounds == "emulator" and self.partitioning:
            raise EntityConfigError(
                f"{self._where}: {PARTITIONING_KEY} true: the Service Bus emulator has no "
                "partitioning; expected false"
            )

    @property
    def _where(self) -> str:
        return f"{self.source}: {self.kind} {excerpt(self.name)}"

    def policy(self) -> DedupPolicy | None:
        """The policy the replay uses for this entity, or ``None`` when detection is off.

        Raises :class:`EntityConfigError` where the service would refuse the settings: detection
        on a Basic namespace, or a window outside the bounds (10 minutes when none is given).
        """
        if not self.requires_duplicate_detection:
            return None
        if self.tier is not None and self.tier.lower() == "basic":
            raise EntityConfigError(
                f"{self._where}: {DETECTION_KEY} true on a Basic tier namespace: duplicate "
                "detection is not available on the Basic tier; expected a Standard or Premium "
                "namespace"
            )
        window = DEFAULT_WINDOW if self.window is None else self.window
        low, high, wording = WINDOW_BOUNDS[self.bounds]
        if not low <= window <= high:
            given = (
                f"{format_window(window)} (the default: no window given)"
                if self.window is None
                else format_window(window)
            )
            raise EntityConfigError(f"{self._where}: {WINDOW_KEY} {given}: {wording}")
        return DedupPolicy(window, self.partitioning, _BOUNDS[self.bounds])


def entity_policies(settings: Iterable[EntitySettings]) -> dict[str, DedupPolicy | None]:
    """Validate all settings together and map entity name to its policy (``None``: detection
    off). One entity named twice must agree: detection and partitioning cannot change after
    creation, and two windows would leave the replay guessing."""
    seen: dict[str, tuple[EntitySettings, DedupPolicy | None]] = {}
    for entity in settings:
        policy = entity.policy()
        if entity.name in seen:
            _check_agree(*seen[entity.name], entity, policy)
        else:
            seen[entity.name] = (entity, policy)
    return {name: policy for name, (_, policy) in seen.items()}


def _check_agree(
    first: EntitySettings,
    first_policy: DedupPolicy | None,
    other: EntitySettings,
    other_policy: DedupPolicy | None,
) -> None:
    """Refuse two settings of one entity that cannot both be true of it."""
    name = first.name
    for label, what, a, b in (
        (DETECTION_KEY, "duplicate detection", first.requires_duplicate_detection,
         other.requires_duplicate_detection),
        (PARTITIONING_KEY, "partitioning", first.partitioning, other.partitioning),
    ):  # fmt: skip
        if a != b:
            raise EntityConfigError(
                f"entity {excerpt(name)}: {label} is {as_json(a)} in {first.source} but "
                f"{as_json(b)} in {other.source}; {what} cannot be changed after an entity is "
                "created, so these cannot both describe it: expected the settings of one "
                "deployment"
            )
    if (
        first_policy is not None
        and other_policy is not None
        and first_policy.window != other_policy.window
    ):
        raise EntityConfigError(
            f"entity {excerpt(name)}: {WINDOW_KEY} is {_window_text(first)} in {first.source} but "
            f"{_window_text(other)} in {other.source}; ambiguous: expected one window per entity"
        )


def _window_text(entity: EntitySettings) -> str:
    if entity.window is None:
        return f"{format_window(DEFAULT_WINDOW)} (the default)"
    return format_window(entity.window)


# --- values as the readers find them ---------------------------------------------------------


def lookup(obj: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``obj[key]``, matching the key without regard to case as Resource Manager does."""
    if key in obj:
        return obj[key]
    lowered = key.lower()
    for name, value in obj.items():
        if isinstance(name, str) and name.lower() == lowered:
            return value
    return default


def read_flag(value: Any, where: str, label: str) -> bool:
    """A boolean setting; absent (or null) is false, the service's default."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise EntityConfigError(f"{where}: {label} {as_json(value)}: expected true or false")
    return value


def read_duration(value: Any, where: str, label: str) -> timedelta | None:
    """A window in a form the service or ``az`` writes; absent (or null) is ``None``. A
    value in such a form that is still no window (``0:99:99``, ``P99999999999D``) keeps
    :func:`~dedup_lib.rules.durations.parse_azure_window`'s reason."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_azure_window(value)
        except InputError as exc:
            reason = str(exc).removeprefix("window: ")
            if not reason.startswith("cannot read"):
                raise EntityConfigError(f"{where}: {label} {reason}") from None
    raise EntityConfigError(f"{where}: {label} {as_json(value)}: expected {_DURATION_FORMS}")


def read_mapping(value: Any, where: str, label: str) -> Mapping[str, Any]:
    """A JSON object; absent (or null) is empty."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EntityConfigError(f"{where}: {label}: expected an object, got {as_json(value)}")
    return value


def read_list(value: Any, where: str, label: str) -> list[Any]:
    """A JSON array; absent (or null) is empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise EntityConfigError(f"{where}: {label}: expected an array, got {as_json(value)}")
    return value


def read_name(value: Any, source: str, kind: str) -> str:
    """An entity's name, without surrounding blanks; it cannot be empty."""
    if not isinstance(value, str) or not value.strip():
        raise EntityConfigError(
            f"{source}: {kind} name {as_json(value)}: expected the entity's name"
        )
    return value.strip()


def service_entity(
    value: Callable[[str], Any],
    name: str,
    kind: str,
    where: str,
    source: str,
    tier: str | None = None,
) -> EntitySettings:
    """An entity of the service (Resource Manager or az), its properties read by ``value``."""
    return EntitySettings(
        name=name,
        kind=kind,
        requires_duplicate_detection=read_flag(value(DETECTION_KEY), where, DETECTION_KEY),
        window=read_duration(value(WINDOW_KEY), where, WINDOW_KEY),
        partitioning=read_flag(value(PARTITIONING_KEY), where, PARTITIONING_KEY),
        requires_session=read_flag(value(SESSIONS_KEY), where, SESSIONS_KEY),
        source=source,
        bounds="service",
        tier=tier,
    )
