"""The ``entity`` label of the monitor's metrics: bounded, and only ever a name Service Bus
allows, so that a sender's text never becomes a label and a flood of names never grows the
series without end."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Entity names a label takes at most; the rest are counted as :data:`OTHER`.
ENTITIES = 200
OTHER = "(other)"
#: The label of a name Service Bus does not allow (:data:`VALID_NAME`).
INVALID = "(invalid)"
#: A queue or topic name as Service Bus allows it: letters, digits, periods, hyphens,
#: underscores and slashes, starting and ending with a letter or digit, 1 to 260 characters.
VALID_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,258}[A-Za-z0-9])?")


class EntityLabels:
    """The labels given so far: a valid name is its own label while fewer than
    :data:`ENTITIES` are given, ``reserved`` names (the entities the user configured) first.

    Examples
    --------
    >>> labels = EntityLabels(reserved=["orders"], budget=2)
    >>> [labels.label(n) for n in ["payments", "audit", "orders", "<b>x</b>", ""]]
    ['payments', '(other)', 'orders', '(invalid)', '']
    """

    def __init__(self, reserved: Iterable[str] = (), budget: int = ENTITIES) -> None:
        self.budget = budget
        self.given: set[str] = set()
        for name in reserved:
            if len(self.given) < budget and VALID_NAME.fullmatch(name):
                self.given.add(name)

    def label(self, name: str | None) -> str:
        """The label of ``name``: itself, :data:`OTHER` past the budget, :data:`INVALID`
        for a name Service Bus does not allow, ``""`` for none."""
        if not name:
            return ""
        if name in self.given:
            return name
        if not VALID_NAME.fullmatch(name):
            return INVALID
        if len(self.given) >= self.budget:
            return OTHER
        self.given.add(name)
        return name

    def restore(self, labels: Iterable[str]) -> None:
        """The labels a checkpoint's counts already use: given again after a restart."""
        self.given.update(label for label in labels if VALID_NAME.fullmatch(label))
