"""An entity's real duplicate-detection settings, read from where they are configured and
validated the way Service Bus would (SPEC.md section 4).

Three formats: Resource Manager templates (and Bicep compiled to JSON), ``az servicebus queue
show`` / ``topic show`` output, and the Service Bus emulator's ``Config.json``. Each yields
:class:`EntitySettings`; :func:`entity_policies` turns them into the per-entity
:class:`~dedup_lib.rules.policy.DedupPolicy` mapping the replay takes. Pure Python.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from dedup_lib.rules.durations import format_window, parse_azure_window
from dedup_lib.rules.policy import (
    DEFAULT_WINDOW,
    WINDOW_BOUNDS,
    Bounds,
    DedupPolicy,
)
from dedup_lib.settings.arm_expressions import (
    Call,
    Opaque,
    Piece,
    UnresolvedError,
    merge_pieces,
    parse_expression,
    split_name,
    template_expression,
)

#: The formats :func:`load_entity_settings` understands, as its errors name them.
FORMATS = (
    "a Resource Manager template or Bicep compiled to JSON (`resources` holding "
    "Microsoft.ServiceBus/namespaces/queues or topics)",
    "`az servicebus queue show` / `topic show` output (one object, or a list as "
    "`az servicebus queue list` prints; `type` Microsoft.ServiceBus/Namespaces/Queues or Topics)",
    "the Service Bus emulator's Config.json (`UserConfig.Namespaces[].Queues` and `Topics`)",
)

_KINDS = ("queue", "topic")
_BOUNDS: dict[str, Bounds] = {"service": "service", "emulator": "emulator"}
_TIERS = {"basic": "Basic", "standard": "Standard", "premium": "Premium"}

_NAMESPACE = "microsoft.servicebus/namespaces"
_ARM_KINDS = {f"{_NAMESPACE}/queues": "queue", f"{_NAMESPACE}/topics": "topic"}

_DETECTION = "requiresDuplicateDetection"
_WINDOW = "duplicateDetectionHistoryTimeWindow"
_PARTITIONING = "enablePartitioning"
_SESSIONS = "requiresSession"

_DURATION_FORMS = (
    "an ISO 8601 duration such as PT10M or P7D (or a TimeSpan such as 0:10:00 or 7.00:00:00, "
    "as older az versions print)"
)


class EntityConfigError(ValueError):
    """An entity's settings cannot be read, or the service would refuse them."""


def _json(value: object) -> str:
    """A value as it appears in the file, for messages."""
    return json.dumps(value, default=repr)


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
                f"{self.source}: entity name {self.name!r}: expected a non-empty name"
            )
        if self.kind not in _KINDS:
            raise EntityConfigError(f"{self._where}: kind: expected 'queue' or 'topic'")
        if self.bounds not in _BOUNDS:
            raise EntityConfigError(
                f"{self._where}: bounds {self.bounds!r}: expected 'service' or 'emulator'"
            )
        for label, flag in (
            (_DETECTION, self.requires_duplicate_detection),
            (_PARTITIONING, self.partitioning),
            (_SESSIONS, self.requires_session),
        ):
            if not isinstance(flag, bool):
                raise EntityConfigError(f"{self._where}: {label} {flag!r}: expected true or false")
        if self.window is not None and not isinstance(self.window, timedelta):
            raise EntityConfigError(
                f"{self._where}: {_WINDOW} {self.window!r}: expected a timedelta or None"
            )
        if self.bounds == "emulator" and self.partitioning:
            raise EntityConfigError(
                f"{self._where}: {_PARTITIONING} true: the Service Bus emulator has no "
                "partitioning; expected false"
            )

    @property
    def _where(self) -> str:
        return f"{self.source}: {self.kind} {self.name!r}"

    def policy(self) -> DedupPolicy | None:
        """The policy the replay uses for this entity, or ``None`` when detection is off.

        Raises :class:`EntityConfigError` where the service would refuse the settings: detection
        on a Basic namespace, or a window outside the bounds (10 minutes when none is given).
        """
        if not self.requires_duplicate_detection:
            return None
        if self.tier is not None and self.tier.lower() == "basic":
            raise EntityConfigError(
                f"{self._where}: {_DETECTION} true on a Basic tier namespace: duplicate detection "
                "is not available on the Basic tier; expected a Standard or Premium namespace"
            )
        window = DEFAULT_WINDOW if self.window is None else self.window
        low, high, wording = WINDOW_BOUNDS[self.bounds]
        if not low <= window <= high:
            given = (
                f"{format_window(window)} (the default: no window given)"
                if self.window is None
                else format_window(window)
            )
            raise EntityConfigError(f"{self._where}: {_WINDOW} {given}: {wording}")
        return DedupPolicy(window, self.partitioning, _BOUNDS[self.bounds])


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


def load_entity_policies(*paths: str | Path) -> dict[str, DedupPolicy | None]:
    """Load each file with :func:`load_entity_settings`, then :func:`entity_policies`."""
    return entity_policies(entity for path in paths for entity in load_entity_settings(path))


def _check_agree(
    first: EntitySettings,
    first_policy: DedupPolicy | None,
    other: EntitySettings,
    other_policy: DedupPolicy | None,
) -> None:
    """Refuse two settings of one entity that cannot both be true of it."""
    name = first.name
    for label, what, a, b in (
        (_DETECTION, "duplicate detection", first.requires_duplicate_detection,
         other.requires_duplicate_detection),
        (_PARTITIONING, "partitioning", first.partitioning, other.partitioning),
    ):  # fmt: skip
        if a != b:
            raise EntityConfigError(
                f"entity {name!r}: {label} is {_json(a)} in {first.source} but {_json(b)} in "
                f"{other.source}; {what} cannot be changed after an entity is created, so these "
                "cannot both describe it: expected the settings of one deployment"
            )
    if (
        first_policy is not None
        and other_policy is not None
        and first_policy.window != other_policy.window
    ):
        raise EntityConfigError(
            f"entity {name!r}: {_WINDOW} is {_window_text(first)} in {first.source} but "
            f"{_window_text(other)} in {other.source}; ambiguous: expected one window per entity"
        )


def _window_text(entity: EntitySettings) -> str:
    if entity.window is None:
        return f"{format_window(DEFAULT_WINDOW)} (the default)"
    return format_window(entity.window)


_Reader = Callable[[Any, str], list[EntitySettings]]


def _reader(doc: Any) -> _Reader | None:
    """The reader for a parsed document, or ``None`` for a format not understood."""
    if isinstance(doc, dict):
        if isinstance(_get(doc, "UserConfig"), dict):
            return _read_emulator
        if _get(doc, "resources") is not None:
            return _read_arm
        if _az_kind(doc) is not None:
            return _read_az
    if isinstance(doc, list) and (
        not doc or any(isinstance(item, dict) and _az_kind(item) for item in doc)
    ):
        return _read_az
    return None


def _get(obj: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """``obj[key]``, matching the key without regard to case as Resource Manager does."""
    if key in obj:
        return obj[key]
    lowered = key.lower()
    for name, value in obj.items():
        if isinstance(name, str) and name.lower() == lowered:
            return value
    return default


def _flag(value: Any, where: str, label: str) -> bool:
    """A boolean setting; absent (or null) is false, the service's default."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise EntityConfigError(f"{where}: {label} {_json(value)}: expected true or false")
    return value


def _duration(value: Any, where: str, label: str) -> timedelta | None:
    """A window in a form the service or ``az`` writes; absent (or null) is ``None``."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_azure_window(value)
        except ValueError:
            pass
    raise EntityConfigError(f"{where}: {label} {_json(value)}: expected {_DURATION_FORMS}")


def _mapping(value: Any, where: str, label: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise EntityConfigError(f"{where}: {label}: expected an object, got {_json(value)}")
    return value


def _items(value: Any, where: str, label: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise EntityConfigError(f"{where}: {label}: expected an array, got {_json(value)}")
    return value


def _name(value: Any, source: str, kind: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EntityConfigError(f"{source}: {kind} name {_json(value)}: expected the entity's name")
    return value.strip()


# --- az servicebus queue show / topic show ---------------------------------------------------

_AZ_TYPES = {
    "microsoft.servicebus/namespaces/queues": "queue",
    "microsoft.servicebus/namespaces/topics": "topic",
}
_AZ_ID = re.compile(r"/namespaces/[^/]+/(queues|topics)/[^/]+$", re.IGNORECASE)


def _service_entity(
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
        requires_duplicate_detection=_flag(value(_DETECTION), where, _DETECTION),
        window=_duration(value(_WINDOW), where, _WINDOW),
        partitioning=_flag(value(_PARTITIONING), where, _PARTITIONING),
        requires_session=_flag(value(_SESSIONS), where, _SESSIONS),
        source=source,
        bounds="service",
        tier=tier,
    )


def _az_kind(obj: Mapping[str, Any]) -> str | None:
    """``"queue"`` or ``"topic"`` from the object's ``type`` (or, without one, its ``id``)."""
    kind = _get(obj, "type")
    if isinstance(kind, str):
        return _AZ_TYPES.get(kind.lower())
    ident = _get(obj, "id")
    found = _AZ_ID.search(ident) if isinstance(ident, str) else None
    return None if found is None else found[1].lower()[:-1]


def _read_az(doc: Any, path: str) -> list[EntitySettings]:
    """``az servicebus queue show`` / ``topic show`` objects, camelCase at the top level or,
    as some older CLI versions print them, under ``properties``."""
    items = list(enumerate(doc)) if isinstance(doc, list) else [(None, doc)]
    settings = []
    for index, obj in items:
        source = path if index is None else f"{path}: [{index}]"
        if not isinstance(obj, dict):
            raise EntityConfigError(f"{source}: expected a queue or topic object, got {obj!r}")
        kind = _az_kind(obj)
        if kind is None:
            raise EntityConfigError(
                f"{source}: type {_json(_get(obj, 'type'))}: expected "
                "Microsoft.ServiceBus/Namespaces/Queues or Topics (the output of "
                "`az servicebus queue show` or `topic show`)"
            )
        name = _name(_get(obj, "name"), source, kind)
        where = f"{source}: {kind} {name!r}"
        nested = _mapping(_get(obj, "properties"), where, "properties")

        def value(
            key: str, obj: Mapping[str, Any] = obj, nested: Mapping[str, Any] = nested
        ) -> Any:
            found = _get(obj, key)
            return _get(nested, key) if found is None else found

        settings.append(_service_entity(value, name, kind, where, source))
    return settings


# --- Service Bus emulator Config.json ---------------------------------------------------------


def _read_emulator(doc: Any, path: str) -> list[EntitySettings]:
    """The emulator's ``Config.json``: its own window bounds, and no partitioning."""
    user = _get(doc, "UserConfig")
    namespaces = _items(_get(user, "Namespaces"), path, "UserConfig.Namespaces")
    settings = []
    for i, namespace in enumerate(namespaces):
        at = f"UserConfig.Namespaces[{i}]"
        namespace = _mapping(namespace, f"{path}: {at}", "namespace")
        for kind, key in (("queue", "Queues"), ("topic", "Topics")):
            for j, entity in enumerate(_items(_get(namespace, key), f"{path}: {at}", key)):
                source = f"{path}: {at}.{key}[{j}]"
                entity = _mapping(entity, source, kind)
                name = _name(_get(entity, "Name"), source, kind)
                where = f"{source}: {kind} {name!r}"
                props = _mapping(_get(entity, "Properties"), where, "Properties")
                if _flag(_get(props, "EnablePartitioning"), where, "EnablePartitioning"):
                    raise EntityConfigError(
                        f"{where}: EnablePartitioning true: the Service Bus emulator has no "
                        "partitioning; expected false or nothing"
                    )
                settings.append(
                    EntitySettings(
                        name=name,
                        kind=kind,
                        requires_duplicate_detection=_flag(
                            _get(props, _DETECTION), where, "RequiresDuplicateDetection"
                        ),
                        window=_duration(
                            _get(props, _WINDOW), where, "DuplicateDetectionHistoryTimeWindow"
                        ),
                        partitioning=False,
                        requires_session=_flag(_get(props, _SESSIONS), where, "RequiresSession"),
                        source=source,
                        bounds="emulator",
                    )
                )
    return settings


# --- Resource Manager templates and Bicep compiled to JSON -----------------------------------


class _Template:
    """Evaluates the few template expressions that settings and names use: ``parameters('x')``
    (from its ``defaultValue``), ``variables('x')``, and, for names, ``concat`` and ``format``."""

    def __init__(self, doc: Mapping[str, Any], path: str) -> None:
        self.parameters = _mapping(_get(doc, "parameters"), path, "parameters")
        self.variables = _mapping(_get(doc, "variables"), path, "variables")

    def value(self, raw: Any, depth: int = 0) -> Any:
        """A JSON value with a ``[parameters('x')]`` or ``[variables('x')]`` in it resolved."""
        if depth > 20:
            raise UnresolvedError("the expressions refer to each other too deeply")
        expression = template_expression(raw)
        if expression is None:
            return raw
        node = parse_expression(expression)
        if isinstance(node, Call):
            ref = self._reference(node)
            if ref is None:
                raise UnresolvedError(
                    f"{node.func}() is not evaluated here (only parameters('name') and "
                    "variables('name') are)"
                )
            return self.value(ref, depth + 1)
        return node

    def _reference(self, node: Call) -> Any:
        """What ``parameters('x')`` or ``variables('x')`` stands for; ``None`` for other calls."""
        if not (node.plain and len(node.args) == 1 and isinstance(node.args[0], str)):
            return None
        name = node.args[0]
        if node.func == "parameters":
            declared = _get(self.parameters, name)
            if not isinstance(declared, dict):
                raise UnresolvedError(f"the template declares no parameter {name!r}")
            missing = object()
            default = _get(declared, "defaultValue", missing)
            if default is missing:
                raise UnresolvedError(
                    f"parameter {name!r} has no defaultValue (its value comes with the deployment)"
                )
            return default
        if node.func == "variables":
            missing = object()
            found = _get(self.variables, name, missing)
            if found is missing:
                raise UnresolvedError(f"the template declares no variable {name!r}")
            return found
        return None

    def pieces(self, raw: Any, depth: int = 0) -> list[Piece]:
        """A name as literal text and opaque parts, so that its last segment can be read
        when only the namespace part is an expression."""
        expression = template_expression(raw)
        if expression is None:
            if isinstance(raw, str):
                return [raw[1:] if raw.startswith("[[") else raw]
            return [Opaque(json.dumps(raw))]
        try:
            node = parse_expression(expression)
        except UnresolvedError:
            return [Opaque(expression)]
        return self._node_pieces(node, depth)

    def _node_pieces(self, node: object, depth: int) -> list[Piece]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, int) and not isinstance(node, bool):
            return [str(node)]
        if not isinstance(node, Call) or not node.plain or depth > 20:
            return [Opaque(str(node))]
        if node.func == "concat":
            return [piece for arg in node.args for piece in self._node_pieces(arg, depth)]
        if node.func == "format" and node.args and isinstance(node.args[0], str):
            return self._format_pieces(node.args[0], node.args[1:], depth)
        try:
            ref = self._reference(node)
        except UnresolvedError:
            ref = None
        if ref is None:
            return [Opaque(node.text)]
        return self.pieces(ref, depth + 1)

    def _format_pieces(self, template: str, args: tuple[object, ...], depth: int) -> list[Piece]:
        out: list[Piece] = []
        pos = 0
        for found in re.finditer(r"\{\{|\}\}|\{(\d+)(?:,[^}:]*)?(?::[^}]*)?\}", template):
            out.append(template[pos : found.start()])
            pos = found.end()
            if found[1] is None:
                out.append(found[0][0])
            elif int(found[1]) < len(args) and ":" not in found[0]:
                out.extend(self._node_pieces(args[int(found[1])], depth))
            else:
                out.append(Opaque(found[0]))
        out.append(template[pos:])
        return out


@dataclass(frozen=True)
class _Resource:
    locator: str
    full_type: str
    body: Mapping[str, Any]
    namespace: Mapping[str, Any] | None


def _walk(
    resources: Any, locator: str, parent_type: str | None, namespace: Mapping[str, Any] | None
) -> Iterator[_Resource]:
    """Every resource, nested child resources included, with its full type (lower case) and
    the namespace resource it is nested in, if any. Symbolic-name templates (Bicep's
    languageVersion 2.0) hold ``resources`` as an object."""
    if isinstance(resources, list):
        items = [(f"{locator}[{i}]", r) for i, r in enumerate(resources)]
    elif isinstance(resources, dict):
        items = [(f"{locator}[{k!r}]", r) for k, r in resources.items()]
    else:
        return
    for at, body in items:
        kind = _get(body, "type") if isinstance(body, dict) else None
        if not isinstance(kind, str):
            continue
        full = kind if parent_type is None or "/" in kind else f"{parent_type}/{kind}"
        yield _Resource(at, full.lower(), body, namespace)
        inner = body if full.lower() == _NAMESPACE else namespace
        yield from _walk(_get(body, "resources"), f"{at}.resources", full, inner)


def _read_arm(doc: Any, path: str) -> list[EntitySettings]:
    """Queues and topics of a Resource Manager template, top level or nested in their
    namespace, with the namespace's SKU as the tier."""
    template = _Template(doc, path)
    resources = [
        r for r in _walk(_get(doc, "resources"), "resources", None, None) if _deployed(template, r)
    ]
    namespaces = [
        (r.body, merge_pieces(template.pieces(_get(r.body, "name"))), _tier(template, r.body))
        for r in resources
        if r.full_type == _NAMESPACE
    ]
    settings = []
    for resource in resources:
        kind = _ARM_KINDS.get(resource.full_type)
        if kind is None:
            continue
        source = f"{path}: {resource.locator}"
        raw_name = _get(resource.body, "name")
        split = split_name(merge_pieces(template.pieces(raw_name)))
        if split is None or not split[1]:
            raise EntityConfigError(
                f"{source}: {kind} name {_json(raw_name)}: cannot determine the entity name; "
                "expected 'namespace/name', a plain name for a child resource, or "
                "concat()/format() ending in a literal '/name'"
            )
        parent, name = split
        tier = _namespace_tier(namespaces, resource.namespace, parent)
        where = f"{source}: {kind} {name!r}"
        props = _mapping(_get(resource.body, "properties"), where, "properties")

        def value(key: str, where: str = where, props: Mapping[str, Any] = props) -> Any:
            raw = _get(props, key)
            try:
                return template.value(raw)
            except UnresolvedError as exc:
                raise EntityConfigError(
                    f"{where}: properties.{key} is {_json(raw)}, which cannot be evaluated "
                    f"here: {exc}; expected a literal value or [parameters('name')] with a "
                    "defaultValue"
                ) from None

        settings.append(_service_entity(value, name, kind, where, source, tier))
    if not settings:
        nested = any(r.full_type == "microsoft.resources/deployments" for r in resources)
        raise EntityConfigError(
            f"{path}: a template without Microsoft.ServiceBus/namespaces/queues or topics"
            + (
                " (resources inside nested deployments or Bicep modules are not read)"
                if nested
                else ""
            )
            + "; expected a template that declares the entities"
        )
    return settings


def _namespace_tier(
    namespaces: list[tuple[Mapping[str, Any], tuple[Piece, ...], str | None]],
    nested_in: Mapping[str, Any] | None,
    parent: tuple[Piece, ...],
) -> str | None:
    """The tier of the entity's namespace: the one it is nested in, else the one its name
    starts with, else the template's only namespace when the names cannot be compared."""
    if nested_in is not None:
        return next((tier for body, _, tier in namespaces if body is nested_in), None)
    matching = [tier for _, name, tier in namespaces if name == parent]
    if matching:
        return matching[0]
    if len(namespaces) == 1:
        _, name, tier = namespaces[0]
        if any(isinstance(piece, Opaque) for piece in (*name, *parent)):
            return tier
    return None


def _deployed(template: _Template, resource: _Resource) -> bool:
    """False for resources the template only refers to (``existing``) or skips (a
    ``condition`` that is false)."""
    if _get(resource.body, "existing") is True:
        return False
    try:
        return template.value(_get(resource.body, "condition", True)) is not False
    except UnresolvedError:
        return True


def _tier(template: _Template, namespace: Mapping[str, Any]) -> str | None:
    """The namespace's SKU, ``None`` when the template leaves it to the deployment."""
    sku = _get(namespace, "sku")
    if not isinstance(sku, dict):
        return None
    try:
        name = template.value(_get(sku, "name")) or template.value(_get(sku, "tier"))
    except UnresolvedError:
        return None
    return _TIERS.get(name.lower(), name) if isinstance(name, str) else None
