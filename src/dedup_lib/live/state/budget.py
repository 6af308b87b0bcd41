"""The memory the driver's state may take: its index of anchors (and the resend alerts'),
which grows with the keys held (docs/decisions/live-state.md). Before a micro-batch is
judged, :meth:`StateBudget.refusal` asks whether its sends could take the indexes past the
budget (each send a new key, each table doubled beside its old one); if so, the monitor
refuses the micro-batch in a sentence that names ``--state executors``, rather than run out
of memory mid-incident. The lines warn from :data:`WARN_SHARE` of it on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dedup_lib.memory import format_size, memory_limit

#: The note's kind (``dedup_notes_total{kind}``) when a micro-batch is refused.
OVER_BUDGET = "state_over_budget"
#: The share of the memory the process may use that the state gets by default: the rest is
#: the driver's JVM and a micro-batch in hand (about 2 GiB for a million sends).
DEFAULT_SHARE = 4
#: The budget where the memory the process may use is unknown.
UNKNOWN = 4 << 30


def default_budget() -> int:
    """A quarter of the memory this process may use (its cgroup's limit, else the machine's),
    in bytes; 4 GiB where neither is known."""
    limit = memory_limit()
    return UNKNOWN if limit is None else limit // DEFAULT_SHARE


@dataclass(frozen=True)
class StateBudget:
    """At most ``limit`` bytes for the driver's state in memory (default:
    :func:`default_budget`).

    Examples
    --------
    >>> budget = StateBudget(1 << 30)
    >>> budget.refusal(3, 600 << 20, 500_000) is None
    True
    >>> import textwrap
    >>> print(textwrap.fill(budget.refusal(3, 1200 << 20, 500_000), 88))
    micro-batch 3 refused: its 500,000 sends could take the driver's state to 1.2 GiB in
    memory, past its budget of 1.0 GiB (--state-memory). Keep the state on Spark's executors
    instead: --state executors, with a new checkpoint; or give the process more memory and
    raise --state-memory
    """

    limit: int = field(default_factory=default_budget)

    def refusal(self, batch: int, needed: int, sends: int) -> str | None:
        """Why micro-batch ``batch`` of ``sends`` sends is refused, when the state could need
        ``needed`` bytes judging it; None when that fits."""
        if needed <= self.limit:
            return None
        return (
            f"micro-batch {batch} refused: its {sends:,} sends could take the driver's state to "
            f"{format_size(needed)} in memory, past its budget of {format_size(self.limit)} "
            "(--state-memory). "
            "Keep the state on Spark's executors instead: --state executors, with a new "
            "checkpoint; or give the process more memory and raise --state-memory"
        )
