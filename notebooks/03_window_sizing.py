# ---
# jupyter:
#   kernelspec:
#     display_name: dedup-lib (Spark)
#     language: python
#     name: dedup-lib
# ---

# %% [markdown]
# # 3. Sizing the window
#
# Sweeps the window over 50 values from 20 s to 7 days, for both partitioning modes, and plots
# what each one catches (the share of true resends dropped as duplicates), what it destroys
# (distinct messages dropped and never delivered) and what it costs (the most ids held at once).
# It then picks the smallest window that catches the target share of the resends a window *can*
# catch: those sent again with an id already used. Resends with a fresh id per attempt, or
# without an id, escape every window; the top panel shows them as the gap between its lines.
#
# The sweep answers from one Spark pass per mode; its figures are exactly what
# `detect_duplicates` gives at each window.

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import ReplayCache, load_telemetry, sample_path

TARGET = 0.99  # share of the catchable resends (same id as an earlier send) to catch
loaded = load_telemetry(spark, sample_path("day.parquet"))
caches = {mode: ReplayCache.build(loaded.valid, mode) for mode in (False, True)}
sweeps = {mode: cache.sweep() for mode, cache in caches.items()}

# %%
from dedup_lib import charts, smallest_window

for mode, sweep in sweeps.items():
    best = smallest_window(sweep, TARGET)
    title = f"Window sweep, partitioning {'enabled' if mode else 'disabled'}"
    chosen = None if best is None else best["window_s"]
    charts.show(charts.window_sweep(sweep, target=TARGET, chosen_s=chosen, title=title))

# %% [markdown]
# The smallest window reaching the target, per mode, with what it loses and costs. When that window is hours long, the late resends are replays: catching them costs messages lost to reused ids and a large history. Often the better fix is in the sender (keep one MessageId per message, make replays idempotent downstream).

# %%
import pandas as pd

from dedup_lib import styled

shown = [
    "window_s",
    "share_catchable_caught",
    "catchable_resends",
    "share_resends_caught",
    "resends",
    "messages_lost",
    "peak_held",
]
picked = []
for mode, sweep in sweeps.items():
    best = smallest_window(sweep, TARGET)
    reached = "no window reaches the target" if best is None else f"smallest reaching {TARGET:.0%}"
    default = caches[mode].sweep(["PT10M"]).iloc[0]
    for choice, row in ((reached, best), ("10m, for comparison", default)):
        values = {} if row is None else row[shown].to_dict()
        picked.append(
            {"partitioning": "enabled" if mode else "disabled", "choice": choice, **values}
        )
styled(pd.DataFrame(picked, columns=["partitioning", "choice", *shown]))
