"""Files that are one stream: the OpenTelemetry Collector's ``file`` exporter with ``rotation``.

The exporter appends to the file at its ``path`` and, when that file is full, renames it to a
backup named by the time of the rotation (lumberjack's naming, UTC unless ``localtime``),
then starts the ``path`` file again::

    traces.json  ->  traces-2026-12-01T19-33-01.992.json  (and a new traces.json)

It writes through a buffer of 4 KiB, so the rotation can fall inside a line: the backup then
ends with the line's start and the next file begins with its rest. The members of a stream
in order (backups by their time, the active file last) let the ledger read that line whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BACKUP = re.compile(
    r"^(?P<prefix>.+)-(?P<at>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3})(?P<ext>\.[^.]*)?$"
)


@dataclass(frozen=True)
class Member:
    """A file's place in its stream: the stream's name (its active file's), its order
    within it, and whether it is the active file (still written to)."""

    stream: str
    order: str
    active: bool


def member_of(name: str) -> Member | None:
    """``name``'s place if it is a rotated backup; None for any other name."""
    match = _BACKUP.match(name)
    if match is None:
        return None
    ext = match["ext"] or ""
    return Member(match["prefix"] + ext, match["at"], active=False)


def streams(names: list[str]) -> list[list[str]]:
    """``names`` in reading order, grouped: each rotated stream's backups by time with its
    active file last, and every other file alone; groups by the name they start with."""
    backups: dict[str, list[tuple[str, str]]] = {}
    for name in names:
        member = member_of(name)
        if member is not None:
            backups.setdefault(member.stream, []).append((member.order, name))
    groups = []
    for stream, members in backups.items():
        group = [name for _, name in sorted(members)]
        if stream in names:
            group.append(stream)
        groups.append(group)
    grouped = {name for group in groups for name in group}
    groups += [[name] for name in names if name not in grouped]
    return sorted(groups, key=lambda group: group[0])


def is_active(name: str, group: list[str]) -> bool:
    """Whether ``name`` is the file its stream still writes (the last, unless a backup)."""
    return len(group) > 1 and name == group[-1] and member_of(name) is None
