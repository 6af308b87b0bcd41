"""Tables read from a replay: summaries, what detection misses and destroys, what-ifs.

- :mod:`~dedup_lib.analysis.summaries`: small tables from a ``detect_duplicates`` result, for
  people and charts.
- :mod:`~dedup_lib.analysis.totals`: how the per-entity tables name a missing entity and the
  total row, and the total row itself.
- :mod:`~dedup_lib.analysis.diagnostics`: what the broker says nothing about: resends that
  slipped through, and messages it destroyed.
- :mod:`~dedup_lib.analysis.evidence`: what an input can say, and in words what it cannot.
- :mod:`~dedup_lib.analysis.selection`: one entity and a time range of a result.
- :mod:`~dedup_lib.analysis.whatif`: what other brokers' rules would have done with the same
  sends.
- :mod:`~dedup_lib.analysis.reconcile`: a replay checked against an export of what the broker
  kept, its messages matched to the sends by :mod:`~dedup_lib.analysis.matching`.
"""

from __future__ import annotations

#: The total row of a per-entity table, and the choice "every entity" in filters and controls.
ALL_ENTITIES = "(all)"
#: The entity of sends that name none.
NO_ENTITY = "(none)"
