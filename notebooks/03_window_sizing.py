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
# Point it at your own telemetry in the cell below (`INPUT`, and `FORMAT`, `MAPPING` where
# they apply), start JupyterLab with `make lab INPUT=sends.parquet`, or run it headless:
# `papermill 03_window_sizing.ipynb out.ipynb -p INPUT sends.parquet`. Left at None it reads
# the 200 k-send day sample. The target is a share of resends, which only ground truth tells:
# without it the charts still show what each window drops and holds, and the recommendation
# says why there is none.

# %% tags=["parameters"]
INPUT = None  # a file or folder; None: what `make lab INPUT` names, else the day sample
FORMAT = None  # parquet, csv, json, otlp, app-insights, sb-explorer; None: recognised
MAPPING = None  # {"YourColumn": "message_id", ...} for names that are not the Azure SDK's
TARGET = 0.99  # share of the catchable resends (same id as an earlier send) to catch

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import ReplayCache, WindowSizing, load_telemetry, notebook_input

loaded = load_telemetry(spark, notebook_input(INPUT, "day.parquet"), format=FORMAT, mapping=MAPPING)
sends = loaded.valid.persist()  # parsed once, kept for both replays
caches = {mode: ReplayCache.build(sends, mode) for mode in (False, True)}
sizing = WindowSizing(caches, TARGET)

# %% [markdown]
# The smallest window of the sweep that reaches the target is a measurement (such as
# `13h25m42s`), not a setting: `configurable_window` rounds it up to one a person would
# configure (whole seconds below a minute, whole minutes below ten, then steps of 5, 15 and 30
# minutes, and whole hours from a day up to the service's 7 days), and the figures below are
# those of that window.

# %%
sizing.charts()

# %% [markdown]
# The recommended window per mode, with what it catches, loses and costs; ten minutes beside it.
# When that window is hours long, the late resends are replays: catching them costs messages
# lost to reused ids and a large history. Often the better fix is in the sender (keep one
# MessageId per message, make replays idempotent downstream).

# %%
sizing.recommendation()

# %%
sizing.choices()
