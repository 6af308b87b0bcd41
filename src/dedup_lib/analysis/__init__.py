"""Tables read from a replay: summaries, what detection misses and destroys, what-ifs."""

from __future__ import annotations

#: The total row of a per-entity table, and the choice "every entity" in filters and controls.
ALL_ENTITIES = "(all)"
#: The entity of sends that name none.
NO_ENTITY = "(none)"
