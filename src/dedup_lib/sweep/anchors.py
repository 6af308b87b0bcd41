"""The anchor walk: which sends of each repeated key a window accepts.

A key's first send is accepted and anchors a window; the first later send at or after anchor +
window (half-open: exactly at the end is accepted again) is accepted and anchors the next one.
Sends in between are duplicates of the anchor and do not move it. This is the rule and order
of :func:`dedup_lib.detect_duplicates`, walked send by send down the cache's rows by the one
compiled loop of :mod:`dedup_lib.replay.walk`: a walk is one pass over the rows whatever the
window, where numpy needed a search of the rows for every step of the longest chain (a few ids
reused all day take thousands of steps at a window of seconds;
docs/decisions/sweep-in-memory.md).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from dedup_lib.replay.walk import compile_in_background, walk_keys

__all__ = ["Anchors", "KeyedSends", "compile_in_background", "walk_anchors"]


@dataclass(frozen=True)
class Anchors:
    """The verdicts of one window over the repeated keys of a :class:`ReplayCache`:
    ``accepted`` per send, one byte each (a cache keeps several windows' verdicts: with the
    anchors beside them, 9 bytes per send and window, 1.1 GiB for 8 windows of 16 M sends)."""

    window_us: int
    accepted: np.ndarray

    @property
    def window_micros(self) -> int:
        """:attr:`window_us` under its former name, for a release (``DeprecationWarning``)."""
        warnings.warn(
            "Anchors.window_micros is deprecated: read Anchors.window_us",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.window_us

    @property
    def anchor(self) -> np.ndarray:
        """The row of the accepted send each send counts against (itself when accepted):
        the last accepted row at or before it, a key's first send being always accepted."""
        rows = np.arange(len(self.accepted), dtype=np.int64)
        return np.maximum.accumulate(np.where(self.accepted, rows, 0))


@dataclass(frozen=True)
class KeyedSends:
    """Sends grouped by key, laid out once for walks at any window: ``key_number`` numbers the
    keys 0, 1, 2, ... down the rows, each key's sends together and in replay order, at
    ``time_us``; ``starts`` is each key's first row. Build it with :meth:`of`."""

    key_number: np.ndarray
    time_us: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, key_number: np.ndarray, time_us: np.ndarray) -> KeyedSends:
        """The layout of sends numbered by ``key_number``, at ``time_us`` (both int64)."""
        number = np.ascontiguousarray(key_number, dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, number[1:] != number[:-1]][: len(number)])
        return cls(number, np.ascontiguousarray(time_us, dtype=np.int64), starts.astype(np.int64))


def walk_anchors(sends: KeyedSends, window_us: int) -> Anchors:
    """Each key's anchor chain at ``window_us`` microseconds, for all keys at once."""
    accepted = np.zeros(len(sends.key_number), dtype=np.bool_)
    walk_keys(sends.starts, sends.time_us, np.array([window_us], dtype=np.int64), accepted)
    return Anchors(window_us, accepted)
