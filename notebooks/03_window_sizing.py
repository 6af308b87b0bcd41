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
#
# Set `INPUT` below to your telemetry (or run it headless: `papermill 03_window_sizing.ipynb out.ipynb -p INPUT sends.parquet`).
# It defaults to the 200 k-send day sample.

# %% tags=["parameters"]
INPUT = None  # your telemetry, a file or a folder; None: the shipped day sample
TARGET = 0.99  # share of the catchable resends (same id as an earlier send) to catch

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import ReplayCache, load_telemetry, sample_path

loaded = load_telemetry(spark, INPUT or sample_path("day.parquet"))
caches = {mode: ReplayCache.build(loaded.valid, mode) for mode in (False, True)}
sweeps = {mode: cache.sweep() for mode, cache in caches.items()}

# %% [markdown]
# The smallest window of the sweep that reaches the target is a measurement (such as
# `13h25m42s`), not a setting: `configurable_window` rounds it up to one a person would
# configure (whole seconds below a minute, whole minutes below ten, then steps of 5, 15 and 30
# minutes, and whole hours from a day up to the service's 7 days), and the figures below are
# those of that window.

# %%
from dedup_lib import configurable_window, smallest_window

recommended = {}
for mode, sweep in sweeps.items():
    best = smallest_window(sweep, TARGET)
    if best is not None:
        window = configurable_window(best["window_s"])
        recommended[mode] = (best, window, caches[mode].sweep([window]).iloc[0])

# %%
from dedup_lib import charts

for mode, sweep in sweeps.items():
    title = f"Window sweep, partitioning {'enabled' if mode else 'disabled'}"
    chosen = recommended[mode][1].total_seconds() if mode in recommended else None
    charts.show(charts.window_sweep(sweep, target=TARGET, chosen_s=chosen, title=title))

# %% [markdown]
# The recommended window per mode, with what it catches, loses and costs; ten minutes beside it.
# When that window is hours long, the late resends are replays: catching them costs messages
# lost to reused ids and a large history. Often the better fix is in the sender (keep one
# MessageId per message, make replays idempotent downstream).

# %%
import pandas as pd
from IPython.display import Markdown

from dedup_lib import format_duration, format_window, styled

lines = []
for mode in sweeps:
    where = f"partitioning {'enabled' if mode else 'disabled'}"
    if mode not in recommended:
        lines.append(f"- **{where}**: no window up to 7 days catches {TARGET:.0%}.")
        continue
    best, window, at = recommended[mode]
    lines.append(
        f"- **{where}**: `{format_window(window, 'iso')}` ({format_window(window, 'words')};"
        f" the sweep's smallest window reaching {TARGET:.0%} is"
        f" {format_duration(best['window_s'])}): it catches"
        f" {at['share_catchable_caught']:.1%} of the resends that reuse their id, loses"
        f" {int(at['messages_lost']):,} messages and holds at most {int(at['peak_held']):,} ids."
    )
Markdown("\n".join(lines))

# %%
shown = [
    "window_s",
    "setting",
    "share_catchable_caught",
    "catchable_resends",
    "share_resends_caught",
    "resends",
    "messages_lost",
    "peak_held",
]
picked = []
for mode, cache in caches.items():
    rows = [("10 minutes, for comparison", cache.sweep(["PT10M"]).iloc[0])]
    if mode in recommended:
        _, window, at = recommended[mode]
        rows.insert(0, (f"recommended: {format_window(window, 'words')}", at))
    for choice, row in rows:
        setting = format_window(pd.Timedelta(seconds=row["window_s"]), "iso")
        values = row.to_dict() | {"setting": setting}
        picked.append(
            {"partitioning": "enabled" if mode else "disabled", "choice": choice, **values}
        )
styled(pd.DataFrame(picked, columns=["partitioning", "choice", *shown]))
