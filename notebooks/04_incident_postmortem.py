# ---
# jupyter:
#   kernelspec:
#     display_name: dedup-lib (Spark)
#     language: python
#     name: dedup-lib
# ---

# %% [markdown] tags=["notebook-only"]
# # 4. Incident postmortem
#
# Did the retries during the incident reach the consumers twice? This notebook replays the
# broker's duplicate detection over the telemetry of an incident and tells what was resent,
# what the broker dropped, what reached consumers twice and what would have been lost.
#
# Run it here, or headless: `make postmortem INPUT=path/to/sends WINDOW=PT10M` writes a
# self-contained HTML report under `reports/`. Cells tagged `notebook-only`, like this one,
# are left out of the report: its reader does not run it.

# %% tags=["parameters"]
INPUT = None  # a file or folder; None: what `make lab INPUT` names, else the incident sample
FORMAT = None  # parquet, csv, json, otlp, app-insights, sb-explorer; None: recognised
MAPPING = None  # {"YourColumn": "message_id", ...} for names that are not the Azure SDK's
WINDOW = "PT10M"  # the entity's duplicateDetectionHistoryTimeWindow
PARTITIONING = False  # enablePartitioning of the entity
ENTITY = "(all)"  # one queue or topic, or "(all)"
START = None  # ISO 8601 start of the incident, None: from the first send
END = None  # ISO 8601 end, None: to the last send
CONTENT = None  # the columns that say what a message carries; None: payload_hash, if any
EMBED_CHARTS = False  # True in headless runs: charts carry plotly.js, so the HTML works offline
KEPT = None  # what the broker kept (a Service Bus Explorer export); None: the sample's
KEPT_FORMAT = None  # its format, None: recognised from the content
KEPT_MAPPING = None  # its columns' names, as MAPPING, where they are not the canonical ones

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import DedupPolicy, Incident, load_telemetry, notebook_input

path = notebook_input(INPUT, "incident.parquet")
policy = DedupPolicy(WINDOW, partitioning=PARTITIONING)
loaded = load_telemetry(spark, path, format=FORMAT, mapping=MAPPING)
sends = loaded.valid.persist()  # parsed once, kept for the sections below
incident = Incident(sends, policy, ENTITY, START, END, CONTENT, embed=EMBED_CHARTS)

# %% [markdown] tags=["notebook-only"]
# The report's title and summary: what reached consumers again and what was lost, over the
# entity and time range of the parameters, and the window that would have caught the late
# resends, rounded up to one a person would configure, with what it would have lost.

# %%
incident.heading()

# %%
import pandas as pd

from dedup_lib import styled

name = path.rsplit("/", 1)[-1]
styled(pd.DataFrame([{"input": name, **loaded.counts(), "replayed with": policy.describe()}]))

# %% [markdown]
# ## What the broker did
# Verdicts per entity at this window, over the whole input (the broker saw all of it).

# %%
incident.verdicts()

# %% [markdown]
# ## What reached consumers twice, and what was lost
# With ground truth (which sends are resends of which message) the replay says how many resends were caught, how many slipped through, and how many distinct messages the broker dropped without a trace. Over the whole input, as the verdicts above: the sections from "Over the incident" on narrow to the entity and time range.

# %%
incident.ground_truth()

# %% [markdown]
# ## Over the incident
# Sends and the duplicates dropped, minute by minute; then how long after the previous send each resend came (left of the dashed line: caught).

# %%
incident.over_time()

# %% [markdown]
# ## What reached consumers twice, by content, and what was destroyed
#
# Without relying on ground truth: sends whose content (`payload_hash`, or the columns named
# in `CONTENT`) had already been delivered (missed resends, with why), and different messages
# dropped because they reused an id (collisions). Over the incident's entity and time range.

# %%
incident.resends_missed()

# %%
incident.messages_lost()

# %% [markdown]
# ## Would another window have helped?
# The same replay at other windows, over the whole input: the broker's window is one setting for all of an entity's traffic.

# %%
incident.other_windows()

# %% [markdown]
# **Reading it:** resends that came later than the window after their original reached consumers again; if a longer window catches them without losing messages (reused ids) or holding too many ids, propose it. Resends with a new MessageId per attempt are not caught by any window: the sender must keep its id.

# %% [markdown]
# ## Check against the broker
# An export of the entity (what Service Bus Explorer saves of its messages) lists what the broker kept, never what it dropped. Matching each kept message to its send tells whether the broker's real window agrees with the replay's: **contradictions** are kept messages the replay drops (the real window is shorter, or detection is off), **unexplained** ones have no send in the telemetry, **pairs** are two kept messages of one key inside the window. Below the table, the contradictions, first twenty: `gap_s` is how long after the original the replay matched it with each came; where `original_kept` is true the broker kept that original too, so its window is at most that gap.

# %% [markdown] tags=["notebook-only"]
# The shipped sample's export is what the broker kept of `orders` when its real window was one minute: replayed at ten, the check finds the difference and names the window that agrees. For your own entity, save its messages with Service Bus Explorer (select them, *Save*; or a peek) and set `KEPT` to that file, or pass `--kept` to `dedup-lib postmortem`.

# %%
from dedup_lib import shipped_with

kept_path = KEPT or shipped_with(path, "kept")
kept = (
    load_telemetry(spark, kept_path, format=KEPT_FORMAT, mapping=KEPT_MAPPING).valid
    if kept_path
    else None
)
incident.against_the_broker(kept)
