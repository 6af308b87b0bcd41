"""What an input can say, and in words what it cannot.

Ground truth (which sends are attempts of which message) exists only where the generator wrote
it; content (what a message carries) only where the telemetry records it. A section that
needs either asks :class:`Evidence` first and, without it, says in one sentence what is
missing and what would provide it: never a table of zeros, which reads as a finding when it
means "this data cannot say", and never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dedup_lib.analysis.summaries import TRUTH_COLUMNS
from dedup_lib.text import escape

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["Evidence", "Need"]

#: What a section may need of the input.
Need = Literal["ground truth", "content", "partition keys", "batches"]

#: The column the telemetry names its content by when ``CONTENT`` is not given.
DEFAULT_CONTENT = "payload_hash"

_WITHOUT: dict[Need, str] = {
    "ground truth": (
        "the input has no ground truth (`logical_id` and `attempt`, which only the generator "
        "writes), so it cannot say {what}"
    ),
    "content": (
        "the input has no content to compare (`payload_hash`, or the columns `CONTENT` names), "
        "so it cannot say {what}"
    ),
    "partition keys": (
        "the input has no `partition_key` or `session_id` column, so partitioning keys every "
        "send by its MessageId alone and cannot change {what}"
    ),
    "batches": (
        "the input has no `batch_id` column, so no send is known to share a send call and "
        "the batch rule cannot apply to {what}"
    ),
}
_PROVIDE: dict[Need, str] = {
    "ground truth": (
        " Real telemetry has none: the content-based sections tell it from what the sends carry."
    ),
    "content": (
        " Record a hash of each message's body with its send (docs/instrumentation.md), or set "
        "`CONTENT` to the columns that identify what a message carries."
    ),
    "partition keys": "",
    "batches": "",
}


@dataclass(frozen=True)
class Evidence:
    """The analyses an input's columns allow: each section of a notebook asks it, and says
    in words what the input cannot give instead of showing a table it cannot know.

    Parameters
    ----------
    columns : frozenset of str
        The input's columns.
    content : tuple of str
        The content columns to compare (``CONTENT`` as given, else ``payload_hash`` when the
        input has it; empty: none). Build it with :meth:`of`.

    Examples
    --------
    >>> from dedup_lib import Evidence
    >>> evidence = Evidence.of(["entity", "message_id", "send_time", "payload_hash"])
    >>> evidence.has("content"), evidence.has("ground truth")
    (True, False)
    >>> print(evidence.lacks("content", "which sends repeat"))
    None
    """

    columns: frozenset[str]
    content: tuple[str, ...]

    @classmethod
    def of(
        cls, data: DataFrame | Iterable[str], content: str | Sequence[str] | None = None
    ) -> Evidence:
        """What ``data``'s columns allow, its content compared by ``content``: how to build one.

        Parameters
        ----------
        data : DataFrame or iterable of str
            The input: a Spark or pandas frame (its columns are read, no rows), or its
            column names.
        content : str or sequence of str, optional
            The columns that tell one message's content from another's (``CONTENT``).
            None: ``payload_hash`` where ``data`` has it, else none.

        Returns
        -------
        Evidence
            ``columns`` the input's columns, ``content`` the content columns to compare
            (empty: none).

        Examples
        --------
        >>> from dedup_lib import Evidence
        >>> Evidence.of(["entity", "message_id", "payload_hash"]).content
        ('payload_hash',)
        >>> Evidence.of(["entity", "message_id", "body_hash"], content="body_hash").content
        ('body_hash',)
        >>> Evidence.of(["entity", "message_id"]).content
        ()
        """
        columns = frozenset(data.columns if hasattr(data, "columns") else data)
        if content is None:
            found: tuple[str, ...] = (DEFAULT_CONTENT,) if DEFAULT_CONTENT in columns else ()
        else:
            found = (content,) if isinstance(content, str) else tuple(content)
        return cls(columns, found)

    def has(self, need: Need) -> bool:
        """Whether the input can give what ``need`` names.

        Parameters
        ----------
        need : {"ground truth", "content", "partition keys", "batches"}
            What a section needs: the ground truth columns (``logical_id``, ``attempt``),
            the content columns, a ``partition_key`` or ``session_id`` column, or
            ``batch_id``.

        Returns
        -------
        bool
            True when the input's columns hold it.

        Examples
        --------
        >>> from dedup_lib import Evidence
        >>> evidence = Evidence.of(["entity", "message_id", "send_time", "batch_id"])
        >>> evidence.has("batches"), evidence.has("partition keys")
        (True, False)
        >>> Evidence.of(["message_id", "logical_id", "attempt"]).has("ground truth")
        True
        """
        if need == "ground truth":
            return all(c in self.columns for c in TRUTH_COLUMNS)
        if need == "content":
            return bool(self.content) and all(c in self.columns for c in self.content)
        if need == "partition keys":
            return bool({"partition_key", "session_id"} & self.columns)
        return "batch_id" in self.columns

    def lacks(self, need: Need, what: str) -> str | None:
        """The sentence a section shows instead of its table when the input lacks ``need``.

        A section the input cannot fill says so in words: a table of zeros would read as a
        finding.

        Parameters
        ----------
        need : {"ground truth", "content", "partition keys", "batches"}
            What the section needs (see :meth:`has`).
        what : str
            What the section would say, as words that finish "it cannot say ...".

        Returns
        -------
        str or None
            None when the input has ``need``; else one or two sentences in markdown: that
            the input cannot say ``what``, why, and what would provide it.

        Examples
        --------
        >>> from dedup_lib import Evidence
        >>> evidence = Evidence.of(["entity", "message_id", "send_time"])
        >>> print(evidence.lacks("ground truth", "which resends were caught"))
        The input has no ground truth (`logical_id` and `attempt`, which only the generator
        writes), so it cannot say which resends were caught. Real telemetry has none: the
        content-based sections tell it from what the sends carry.
        >>> print(Evidence.of(["payload_hash"]).lacks("content", "which sends repeat"))
        None
        """
        if self.has(need):
            return None
        missing = [c for c in self.content if c not in self.columns]
        if need == "content" and missing:
            named = ", ".join(escape(name, "markdown") for name in missing)
            return (
                f"The content columns named in `CONTENT` ({named}) are not in the input, so it "
                f"cannot say {what}. Name columns the input has."
            )
        sentence = _WITHOUT[need].format(what=what)
        return sentence[0].upper() + sentence[1:] + "." + _PROVIDE[need]
