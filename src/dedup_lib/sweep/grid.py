"""Which windows to sweep, which one to pick, and windows as the microseconds the cache uses."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from dedup_lib.rules.durations import parse_window
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


def to_micros(duration: timedelta | float | str) -> int:
    """A window or time bucket in whole microseconds: how the cache keys, walks and buckets."""
    return int(parse_window(duration) // timedelta(microseconds=1))
