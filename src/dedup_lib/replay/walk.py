"""The anchor walk, written once in Python: down each key's sends in replay order, which send
opens a window and which falls in the one open (docs/rules.md, section 1).

A key's first send is accepted and anchors a window, unless the key holds an anchor already
whose window has not closed; the first later send at or after anchor + window (half-open:
exactly at the end is accepted again) is accepted and anchors the next one. Sends in between
are duplicates of the anchor and do not move it. One loop, compiled by numba (a walk is one
pass over the rows, whatever the window), serves every Python caller: the explorer's sweep
(:mod:`dedup_lib.sweep.anchors`), the live monitor's judge (:mod:`dedup_lib.live.state.judge`)
and the replay's Python kernel (:mod:`dedup_lib.replay.kernels.python`). Its Java twin is
``kernels/java/Anchor.java``, the rule both JVM walks call (the replay's JVM kernel and the
live monitor's judge on the executors).
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import numpy as np

#: The window end of a key that holds no anchor: any send of it opens a window.
NO_ANCHOR = np.iinfo(np.int64).min
_NONE = np.zeros(0, dtype=np.int64)


def walk_keys(
    starts: np.ndarray,
    times: np.ndarray,
    windows: np.ndarray,
    accepted: np.ndarray,
    closes: np.ndarray = _NONE,
    anchor: np.ndarray = _NONE,
) -> None:
    """Walk each key's sends, writing which are accepted and what each duplicate counts
    against.

    Parameters
    ----------
    starts : numpy.ndarray
        The first row of each key (int64, ascending, the first 0): a key's sends are the rows
        up to the next key's first, in replay order.
    times : numpy.ndarray
        Each send's time in microseconds (int64).
    windows : numpy.ndarray
        Each send's window in microseconds (int64), or one window for every send.
    accepted : numpy.ndarray
        Written: True where the send is accepted (bool, one per send, all False on entry).
    closes : numpy.ndarray, optional
        Per key, where the window of the anchor it already holds ends (int64), or
        :data:`NO_ANCHOR`; empty (the default): no key holds one.
    anchor : numpy.ndarray, optional
        Written, unless empty (the default): the row of the accepted send a duplicate counts
        against, ``-1`` where that is the anchor the key held (int64, one per send).

    Examples
    --------
    Two keys, a window of 10 µs: the first key's sends at 0, 5, 10 and 12 (10 opens the next
    window), the second's at 3 and 4; the second key holds an anchor whose window ends at 4.

    >>> import numpy as np
    >>> times = np.array([0, 5, 10, 12, 3, 4])
    >>> accepted = np.zeros(6, dtype=bool)
    >>> anchor = np.full(6, -1)
    >>> walk_keys(np.array([0, 4]), times, np.array([10]), accepted,
    ...           closes=np.array([NO_ANCHOR, 4]), anchor=anchor)
    >>> accepted.tolist()
    [True, False, True, False, False, True]
    >>> anchor.tolist()
    [-1, 0, -1, 2, -1, -1]
    """
    if len(times):
        _compiled()(
            _longs(starts), _longs(times), _longs(windows), accepted, _longs(closes), _longs(anchor)
        )


def _longs(values: np.ndarray) -> np.ndarray:
    """``values`` as contiguous int64, the one layout the loop is compiled for (another would
    compile it again); written arrays are passed as they are."""
    if values.dtype == np.int64 and values.flags.c_contiguous:
        return values
    return np.ascontiguousarray(values, dtype=np.int64)


@cache
def compile_in_background() -> threading.Thread:
    """The walk compiled in a thread of its own, once per process: started as a monitor starts
    or a cache builds, so that their first walk finds it compiled (compiling takes longer than
    a walk)."""
    one = np.zeros(1, dtype=np.int64)
    warm = (one, one, one, np.zeros(1, dtype=np.bool_), one, one.copy())
    thread = threading.Thread(target=walk_keys, args=warm, name="dedup-walk-compile", daemon=True)
    thread.start()
    return thread


def walk_loop(
    starts: Any, times: Any, windows: Any, accepted: Any, closes: Any, anchor: Any
) -> None:
    """The loop of :func:`walk_keys` over its arguments as given (arrays or lists), in plain
    Python: numba compiles it for :func:`walk_keys`; the replay's Python kernel runs it as it
    is, in Spark's Python workers, which need no numba."""
    rows = len(times)
    one = len(windows) == 1
    held = len(closes) > 0
    track = len(anchor) > 0
    for key in range(len(starts)):
        stop = starts[key + 1] if key + 1 < len(starts) else rows
        end = closes[key] if held else NO_ANCHOR
        current = -1
        for row in range(starts[key], stop):
            if times[row] >= end:
                accepted[row] = True
                end = times[row] + (windows[0] if one else windows[row])
                current = row
            elif track:
                anchor[row] = current


@cache
def _compiled() -> Any:
    """:func:`walk_loop` compiled on first use, once per process (numba's import is as long,
    and the library's other paths do without it), or loaded from numba's cache on disk
    (``cache=True``: where ``NUMBA_CACHE_DIR`` says, else beside this file or in the user's
    cache), which a process started again reads rather than compiling for over a second. It
    holds no lock on Python objects (``nogil``): a walk runs beside the thread that builds the
    other mode of a cache."""
    from numba import njit

    return njit(nogil=True, cache=True)(walk_loop)
