# ---
# jupyter:
#   kernelspec:
#     display_name: dedup-lib (Spark)
#     language: python
#     name: dedup-lib
# ---

# %% [markdown]
# # 5. Live monitor
#
# Is it happening now? This notebook watches a folder where telemetry lands (the
# OpenTelemetry Collector's file exporter, `record_sends`, any pipeline that drops files) and
# replays the broker's duplicate detection on each send as it arrives: sends, duplicates and
# alerts per minute, and the latest alerts, redrawn as each micro-batch comes in.
#
# A send is judged once the **watermark** (the latest send time seen minus `LATENESS`) has
# passed it, so every send that lands within the lateness gets exactly the verdict of a batch
# replay; telemetry that lands later is counted as **late**, never dropped. Alerts: a
# **collision** is a different message (by `payload_hash` or `CONTENT`) dropped as a
# duplicate, lost without a signal to its sender; a **resend** is the same content accepted
# again within an hour, so it reached consumers twice; a **rejected** send was refused.
#
# Set `SOURCE` to the folder your telemetry lands in. Left at None, the notebook lands
# `INPUT` (default: the incident sample) in a folder of its own, one file every few seconds,
# as a stream would. **What to do next:** collisions mean ids are reused: look at them in
# `02_window_explorer`; many late sends mean the lateness is too short for your pipeline.

# %% tags=["parameters"]
SOURCE = None  # the folder your telemetry lands in; None: INPUT landed in steps, below
INPUT = None  # with SOURCE None: a file or folder to land (default: the incident sample)
FORMAT = None  # parquet, csv, json, otlp; None: recognised
MAPPING = None  # {"YourColumn": "message_id", ...} for names that are not the Azure SDK's
WINDOW = "PT10M"  # the entity's duplicateDetectionHistoryTimeWindow
PARTITIONING = False  # enablePartitioning of the entity
LATENESS = "PT1M"  # how late telemetry may land and still be judged
CONTENT = None  # the columns that say what a message carries; None: payload_hash, if any
WORK = "live-monitor"  # the monitor's own folder: verdicts, quarantine, checkpoint
RUN_FOR = None  # seconds the last cell lets the monitor run before stopping it; None: at once

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores

# %% [markdown]
# Where the sends come from. With `SOURCE` set, nothing is written there: the monitor only
# reads it. Otherwise `INPUT` lands in `WORK/landing`, a file every five seconds.

# %%
import os
import shutil

from dedup_lib import land_in_steps, notebook_input

shutil.rmtree(WORK, ignore_errors=True)  # each run of this notebook starts afresh
landing = SOURCE or os.path.join(WORK, "landing")
if SOURCE is None:
    land_in_steps(notebook_input(INPUT, "incident.parquet"), landing, files=8, every=5)

# %% [markdown]
# The monitor: sends per minute by verdict, alerts per minute, the latest alerts. It keeps
# running in the background and redraws in place; the line above the charts says when the
# last micro-batch came in and how large the monitor's state is (the keys whose window is
# open: it grows with the window, so watch it with P1D or P7D). Verdicts are written to
# `WORK/verdicts` (Parquet, a file per micro-batch).

# %%
from dedup_lib import DedupPolicy, JudgeOptions, LiveMonitor, ReadOptions, WatchOptions

monitor = LiveMonitor()
monitor.start(
    spark,
    landing,
    DedupPolicy(WINDOW, partitioning=PARTITIONING),
    LATENESS,
    out=os.path.join(WORK, "verdicts"),
    checkpoint=os.path.join(WORK, "checkpoint"),
    options=WatchOptions(
        reading=ReadOptions(format=FORMAT, mapping=MAPPING, trigger="2 seconds"),
        judging=JudgeOptions(content=CONTENT),
    ),
)
monitor.view()

# %% [markdown]
# The latest alerts as a table (newest first), as of running this cell; run it again for
# newer ones. `monitor.alerts()` gives them as a pandas DataFrame.

# %%
monitor.latest()

# %% [markdown]
# The monitor's counters and gauges, the ones `dedup-lib watch --metrics HOST:PORT` serves to
# Prometheus for on-call alerting (docs/guide/live.md, "Metrics and alerts"): sends by entity
# and verdict, alerts by entity and kind, the watermark and how far it trails the clock, the
# state's size. Run the cell again for newer values.

# %%
monitor.counters()

# %% [markdown]
# Stop the monitor: run this cell when you have seen enough (with `RUN_FOR`, it waits that
# many seconds first). Run the monitor cell again to start afresh; a monitor started with
# the same `checkpoint` folder resumes where it stopped.

# %%
monitor.stop(after=RUN_FOR)
