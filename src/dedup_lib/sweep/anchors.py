"""The anchor walk: which sends of each repeated key a window accepts, in numpy alone.

A key's first send is accepted and anchors a window; the first later send at or after anchor +
window (half-open: exactly at the end is accepted again) is accepted and anchors the next one.
Sends in between are duplicates of the anchor and do not move it. This is the rule and order
of :func:`dedup_lib.detect_duplicates`, walked for all keys at once with ``searchsorted``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Largest value a chunk of keys laid side by side may reach, well inside int64.
_SAFE = 1 << 62
#: Steps of every chain taken by searching the whole axis, before the keys still walking
#: follow pointers instead (:func:`_follow`): by then they are the few keys with long chains
#: (an id reused all day, a window of seconds), thousands of steps each, and each search of
#: the whole axis for a few keys costs a cache miss per level (PT20S on 14 M sends: 1.1 s
#: walked by search alone, 0.4 s this way).
SEARCHED_PASSES = 32


@dataclass(frozen=True)
class Anchors:
    """The verdicts of one window over the repeated keys of a :class:`ReplayCache`:
    ``accepted`` per send, and ``anchor``, the row of the accepted send each send counts
    against (itself when accepted)."""

    window_micros: int
    accepted: np.ndarray
    anchor: np.ndarray


@dataclass(frozen=True)
class KeyedSends:
    """Sends grouped by key, laid out once for walks at any window.

    ``segment`` numbers the keys 0, 1, 2, ... down the rows, each key's sends together and in
    replay order. ``starts`` is each key's first row, ``relative`` each send's time since
    its key's first send, ``span`` one more than the largest ``relative``: with times
    relative, keys fit side by side on one int64 axis. Build it with :meth:`of`."""

    segment: np.ndarray
    starts: np.ndarray
    relative: np.ndarray
    span: int

    @classmethod
    def of(cls, segment: np.ndarray, time_us: np.ndarray) -> KeyedSends:
        """The layout of sends numbered by ``segment``, at ``time_us`` (both int64)."""
        starts: np.ndarray = (
            np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
            if len(segment)
            else np.zeros(0, dtype=np.int64)
        )
        starts = starts.astype(np.int64)
        first = np.repeat(time_us[starts], np.diff(np.r_[starts, len(segment)]))
        relative = time_us - first
        span = int(relative.max()) + 1 if len(segment) else 1
        return cls(segment, starts, relative, span)


def walk_anchors(sends: KeyedSends, window_us: int) -> Anchors:
    """Each key's anchor chain at ``window_us`` microseconds, for all keys at once."""
    n = len(sends.segment)
    accepted = np.zeros(n, dtype=bool)
    # Keys side by side on one axis: segment * stride + time since the key's first send.
    stride = sends.span + window_us + 1
    per_chunk = max(1, _SAFE // stride)
    segments = int(sends.segment[-1]) + 1 if n else 0
    for low in range(0, segments, per_chunk):
        if per_chunk >= segments:
            rows = slice(None)
            current = sends.starts
        else:
            rows = slice(*np.searchsorted(sends.segment, [low, low + per_chunk]))
            current = None
        segment = sends.segment[rows]
        line = (segment - low) * stride + sends.relative[rows]
        if current is None:
            current = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
        hit = accepted[rows]
        # Each key's accepted sends, one step of its chain per pass: the first send at or
        # after the end of the current one's window, in the same key.
        for _ in range(SEARCHED_PASSES):
            if not len(current):
                break
            hit[current] = True
            following = np.searchsorted(line, line[current] + window_us, side="left")
            inside = following < len(line)
            current, following = current[inside], following[inside]
            current = following[segment[following] == segment[current]]
        if len(current):
            _follow(hit, line, segment, current, window_us)
    # Every send counts against the last accepted send of its key at or before it.
    anchor = np.maximum.accumulate(np.where(accepted, np.arange(n, dtype=np.int64), 0))
    return Anchors(window_us, accepted, anchor)


def _follow(
    hit: np.ndarray, line: np.ndarray, segment: np.ndarray, current: np.ndarray, window_us: int
) -> None:
    """The rest of the chains from ``current`` (one unmarked anchor per key, ascending):
    each later row of those keys gets the row its window would accept next, in one search of
    those rows alone; the chains then follow these pointers."""
    ends = np.searchsorted(segment, segment[current], side="right")
    lengths = ends - current
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    rows = np.repeat(current - offsets, lengths) + np.arange(int(lengths.sum()))
    times, owner = line[rows], segment[rows]
    following = np.searchsorted(times, times + window_us, side="left")
    at = offsets
    while len(at):
        hit[rows[at]] = True
        step = following[at]
        inside = step < len(rows)
        at, step = at[inside], step[inside]
        at = step[owner[step] == owner[at]]
