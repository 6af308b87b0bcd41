"""Entity settings from a Resource Manager template, or Bicep compiled to JSON: queues and
topics declared at the top level or nested in their namespace, with the namespace's SKU as the
tier. Settings may be literals or ``[parameters('x')]`` / ``[variables('x')]`` with a value in
the template; anything else is refused with the expression named (:mod:`.arm_expressions`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dedup_lib.errors import excerpt
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
from dedup_lib.settings.model import (
    EntityConfigError,
    EntitySettings,
    as_json,
    lookup,
    read_mapping,
    service_entity,
)

_TIERS = {"basic": "Basic", "standard": "Standard", "premium": "Premium"}

_NAMESPACE = "microsoft.servicebus/namespaces"
_ARM_KINDS = {f"{_NAMESPACE}/queues": "queue", f"{_NAMESPACE}/topics": "topic"}

#: A namespace resource: its body, its name as pieces, and its tier.
_Namespace = tuple[Mapping[str, Any], tuple[Piece, ...], str | None]


def read_arm(doc: Any, path: str) -> list[EntitySettings]:
    """Queues and topics of a Resource Manager template, top level or nested in their
    namespace, with the namespace's SKU as the tier."""
    template = _Template(doc, path)
    resources = [
        r
        for r in _walk(lookup(doc, "resources"), "resources", None, None)
        if _deployed(template, r)
    ]
    namespaces = [
        (r.body, merge_pieces(template.pieces(lookup(r.body, "name"))), _tier(template, r.body))
        for r in resources
        if r.full_type == _NAMESPACE
    ]
    settings = [
        _entity(template, resource, kind, namespaces, path)
        for resource in resources
        if (kind := _ARM_KINDS.get(resource.full_type)) is not None
    ]
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


def _entity(
    template: _Template,
    resource: _Resource,
    kind: str,
    namespaces: list[_Namespace],
    path: str,
) -> EntitySettings:
    """One queue or topic resource, its name's last segment as the entity name and its
    properties evaluated against the template."""
    source = f"{path}: {resource.locator}"
    raw_name = lookup(resource.body, "name")
    split = split_name(merge_pieces(template.pieces(raw_name)))
    if split is None or not split[1]:
        raise EntityConfigError(
            f"{source}: {kind} name {as_json(raw_name)}: cannot determine the entity name; "
            "expected 'namespace/name', a plain name for a child resource, or "
            "concat()/format() ending in a literal '/name'"
        )
    parent, name = split
    tier = _namespace_tier(namespaces, resource.namespace, parent)
    where = f"{source}: {kind} {excerpt(name)}"
    props = read_mapping(lookup(resource.body, "properties"), where, "properties")

    def value(key: str) -> Any:
        raw = lookup(props, key)
        try:
            return template.value(raw)
        except UnresolvedError as exc:
            shown = as_json(raw) if len(raw) <= 58 else f"({len(raw):,} characters)"
            raise EntityConfigError(
                f"{where}: properties.{key} {shown} cannot be evaluated here: {exc}; "
                "expected a literal or [parameters('name')] with a defaultValue"
            ) from None

    return service_entity(value, name, kind, where, source, tier)


class _Template:
    """Evaluates the few template expressions that settings and names use: ``parameters('x')``
    (from its ``defaultValue``), ``variables('x')``, and, for names, ``concat`` and ``format``."""

    def __init__(self, doc: Mapping[str, Any], path: str) -> None:
        self.parameters = read_mapping(lookup(doc, "parameters"), path, "parameters")
        self.variables = read_mapping(lookup(doc, "variables"), path, "variables")

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
            declared = lookup(self.parameters, name)
            if not isinstance(declared, dict):
                raise UnresolvedError(f"the template declares no parameter {excerpt(name, 30)}")
            missing = object()
            default = lookup(declared, "defaultValue", missing)
            if default is missing:
                raise UnresolvedError(
                    f"parameter {excerpt(name, 30)} has no defaultValue (its value comes with the "
                    "deployment)"
                )
            return default
        if node.func == "variables":
            missing = object()
            found = lookup(self.variables, name, missing)
            if found is missing:
                raise UnresolvedError(f"the template declares no variable {excerpt(name, 30)}")
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
    """A resource of the template: where it is (for messages), its full type in lower case,
    its body, and the namespace resource it is nested in, if any."""

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
        items = [(f"{locator}[{excerpt(k, 40)}]", r) for k, r in resources.items()]
    else:
        return
    for at, body in items:
        kind = lookup(body, "type") if isinstance(body, dict) else None
        if not isinstance(kind, str):
            continue
        full = kind if parent_type is None or "/" in kind else f"{parent_type}/{kind}"
        yield _Resource(at, full.lower(), body, namespace)
        inner = body if full.lower() == _NAMESPACE else namespace
        yield from _walk(lookup(body, "resources"), f"{at}.resources", full, inner)


def _namespace_tier(
    namespaces: list[_Namespace],
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
    if lookup(resource.body, "existing") is True:
        return False
    try:
        return template.value(lookup(resource.body, "condition", True)) is not False
    except UnresolvedError:
        return True


def _tier(template: _Template, namespace: Mapping[str, Any]) -> str | None:
    """The namespace's SKU, ``None`` when the template leaves it to the deployment."""
    sku = lookup(namespace, "sku")
    if not isinstance(sku, dict):
        return None
    try:
        name = template.value(lookup(sku, "name")) or template.value(lookup(sku, "tier"))
    except UnresolvedError:
        return None
    return _TIERS.get(name.lower(), name) if isinstance(name, str) else None
