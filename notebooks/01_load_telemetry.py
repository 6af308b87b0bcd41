# ---
# jupyter:
#   kernelspec:
#     display_name: dedup-lib (Spark)
#     language: python
#     name: dedup-lib
# ---

# %% [markdown]
# # 1. Load message telemetry
#
# Point this notebook at a file or a folder of sends (Parquet, CSV or JSON Lines). It shows
# how the columns were mapped onto the canonical schema, how many rows were loaded and how many
# went to the quarantine (and why), the traffic per entity over time, and the quality of the
# MessageIds: sends without one, GUID-looking ids, and the ids used most often.
#
# **What to do next:** if many rows are quarantined, fix the mapping or the source; if ids look
# reused or constant, expect `02_window_explorer` to show legitimate messages being dropped.
#
# Point it at your own telemetry in the cell below (`INPUT`, and `FORMAT`, `MAPPING` where
# they apply), start JupyterLab with `make lab INPUT=sends.parquet`, or run it headless:
# `papermill 01_load_telemetry.ipynb out.ipynb -p INPUT sends.parquet`. Left at None it reads
# a day of synthetic sends shipped with the workbench (a CSV with the Azure SDK's names).

# %% tags=["parameters"]
INPUT = None  # a file or folder; None: what `make lab INPUT` names, else the day sample
FORMAT = None  # parquet, csv, json, otlp, app-insights, sb-explorer; None: recognised
MAPPING = None  # {"YourColumn": "message_id", ...} for names that are not the Azure SDK's

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import load_telemetry, notebook_input

PATH = notebook_input(INPUT, "day-azure.csv.gz")
loaded = load_telemetry(spark, PATH, format=FORMAT, mapping=MAPPING)
sends = loaded.valid.persist()  # parsed once, kept for the cells below
loaded.mapping

# %% [markdown]
# Rows read, loaded and quarantined. Valid plus quarantined is always what was read. Below the
# table, a note for anything the read did that changes what you see (for example, nanosecond
# timestamps from pandas rounded to the microsecond); none when there is nothing to say.

# %%
from dedup_lib import findings

findings.rows_read(loaded)

# %% [markdown]
# The same per file: every file under `PATH` (subfolders included) is listed with what it gave.
# A file with 0 rows read is empty or has only a header. Hidden and bookkeeping entries
# (`_SUCCESS`, `.crc`, `_temporary`) are not read; `loaded.ignored` lists them with why.

# %%
from dedup_lib import styled

styled(loaded.files)

# %% [markdown]
# The quarantine by reason, then a few quarantined rows with the file they came from:

# %%
findings.quarantined(loaded)

# %% [markdown]
# ### Traffic per entity
# Sends per 10 minutes. Quiet hours and bursts show here; they decide how many ids a window holds.

# %%
from dedup_lib import charts, sends_over_time

charts.show(charts.sends_per_entity(sends_over_time(sends, bucket="PT10M")))

# %% [markdown]
# ### Id quality
# `without_message_id`: sends the service gives a fresh id, so detection cannot protect them.
# `guid_like`: ids shaped like GUIDs; fine when one GUID is kept per message, useless when a new
# one is made per attempt. `sends_per_id` well above 1 on an entity means ids are reused.

# %%
from dedup_lib import id_quality

styled(id_quality(sends))

# %% [markdown]
# The ids sent most often. A constant id (all zeros) or a small pool of ids is a bug that makes the broker drop different messages silently.

# %%
findings.reused_ids(sends, n=5)

# %% [markdown]
# ### Telemetry as you may have it
# Few teams have a clean table of sends. The same three hours of an incident ship with the
# workbench in the shapes telemetry really comes in: OpenTelemetry traces from the Collector's
# file exporter, Application Insights dependency rows (the portal's CSV and the query API's
# JSON), and the Parquet the generator wrote. `load_telemetry` recognises each from its
# content, no mapping needed; `skipped` counts records that are not message sends (HTTP spans,
# the SDK's send-call spans). Each gives the same sends as the Parquet file, so the same
# verdicts. A trace keeps the ids to find each send's trace in your tracing tool (the second
# table). What the broker **kept** is another source: a Service Bus Explorer export of a queue
# lists the messages it accepted, never the duplicates it dropped (the third table); the file
# does not name its queue, so the entity comes from the file name (`orders.json`) or from
# `entity=`, and notebook `04_incident_postmortem` checks a replay against it.
#
# This tour reads the shipped samples; on your own telemetry it is left out.

# %%
findings.telemetry_shapes(spark, PATH)
