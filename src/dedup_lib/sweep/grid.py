"""Which windows to sweep, which one to pick, and windows as the microseconds the cache uses."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pandas as pd

from dedup_lib.errors import InputError
from dedup_lib.rules.durations import format_window, parse_window
from dedup_lib.rules.policy import WINDOW_BOUNDS

#: The service's window bounds in seconds: the sweep's default range.
SERVICE_LOW_S = WINDOW_BOUNDS["service"][0].total_seconds()
SERVICE_HIGH_S = WINDOW_BOUNDS["service"][1].total_seconds()


def window_grid(
    points: int = 50, low: float = SERVICE_LOW_S, high: float = SERVICE_HIGH_S
) -> list[float]:
    """``points`` windows in seconds, evenly spaced on a log scale from ``low`` to ``high``
    (the service's bounds by default), rounded to the microsecond."""
    return [round(float(w), 6) for w in np.geomspace(low, high, points)]


def smallest_window(
    sweep: pd.DataFrame, target: float = 0.99, column: str | None = None
) -> pd.Series | None:
    """The first row of ``sweep`` whose share caught reaches ``target``: of the resends any
    window can catch when there is ground truth, else of judged sends. None when no window
    does."""
    column = column or (
        "share_catchable_caught" if "share_catchable_caught" in sweep else "share_caught"
    )
    reached = sweep[sweep[column] >= target]
    return None if reached.empty else reached.iloc[0]


#: The steps a person configures a window in, by scale: below each bound (seconds), the step
#: (seconds). Whole seconds below a minute, whole minutes below ten, then 5, 15 and 30 minutes,
#: and whole hours from a day up to the service's 7 days.
WINDOW_STEPS: tuple[tuple[float, int], ...] = (
    (60, 1),
    (600, 60),
    (3600, 300),
    (6 * 3600, 900),
    (86400, 1800),
    (math.inf, 3600),
)


def configurable_window(window: timedelta | float | str) -> timedelta:
    """``window`` rounded up to one a person would configure (:data:`WINDOW_STEPS`: 13h25m42s
    becomes 13h30m), never below the service's 20 s. A window longer than the service's 7 days
    is an :class:`InputError`: no window it allows reaches that far."""
    seconds = max(parse_window(window).total_seconds(), SERVICE_LOW_S)
    if seconds > SERVICE_HIGH_S:
        raise InputError(
            f"window: {format_window(parse_window(window))} is longer than the 7 days (P7D) "
            "Service Bus allows; no configurable window reaches it"
        )
    step = next(step for bound, step in WINDOW_STEPS if seconds < bound)
    return timedelta(seconds=min(math.ceil(seconds / step) * step, SERVICE_HIGH_S))


def to_micros(duration: timedelta | float | str) -> int:
    """A window or time bucket in whole microseconds: how the cache keys, walks and buckets."""
    return int(parse_window(duration) // timedelta(microseconds=1))
