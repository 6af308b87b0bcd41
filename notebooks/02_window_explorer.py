# ---
# jupyter:
#   kernelspec:
#     display_name: dedup-lib (Spark)
#     language: python
#     name: dedup-lib
# ---

# %% [markdown]
# # 2. Window explorer
#
# Replays Service Bus duplicate detection over the telemetry with the window and partitioning
# mode you choose. Spark runs when the explorer is built, a progress bar showing each step:
# the partitioning mode shown first is ready when the explorer is drawn, the other is prepared
# while you use it (picked on the toggle before it is ready, it is shown once it is). After
# that every control answers from memory and redraws the charts in place.
#
# - **window**: drag the slider (20 s to 7 days, log scale) or type `PT10M`, `10m` or `0:10:00`;
# - **partitioning**: with it enabled the key is MessageId plus the partition key;
# - **entity** and **time**: narrow the charts and numbers (verdicts are always computed over
#   all the data, as the broker sees it).
#
# The charts: sends and the duplicates the broker drops over time; the delay of every resend
# after the previous send with the same key, with the window drawn (left of the line is caught,
# right of it reaches consumers again), coloured by cause where the data has ground truth; and
# the ids held in the duplicate history, the throughput cost of the window.
#
# Point it at your own telemetry in the cell below (`INPUT`, and `FORMAT`, `MAPPING`,
# `CONTENT`, `ENTITIES` where they apply), start JupyterLab with `make lab INPUT=sends.parquet`,
# or run it headless: `papermill 02_window_explorer.ipynb out.ipynb -p INPUT sends.parquet`.
# Left at None it reads the 200 k-send day sample. Sections that need what your telemetry
# does not have (the generator's ground truth, the messages' content, entity settings) say so
# in one sentence, and what would provide it.

# %% tags=["parameters"]
INPUT = None  # a file or folder; None: what `make lab INPUT` names, else the day sample
FORMAT = None  # parquet, csv, json, otlp, app-insights, sb-explorer; None: recognised
MAPPING = None  # {"YourColumn": "message_id", ...} for names that are not the Azure SDK's
WINDOW = "PT10M"  # the window shown first and compared below
CONTENT = None  # the columns that say what a message carries; None: payload_hash, if any
ENTITIES = None  # entity settings files (ARM, az, emulator); None: the sample's, for the sample

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import Evidence, WindowExplorer, load_telemetry, notebook_input

path = notebook_input(INPUT, "day.parquet")
loaded = load_telemetry(spark, path, format=FORMAT, mapping=MAPPING)
sends = loaded.valid.persist()  # parsed once, kept for the sections below
evidence = Evidence.of(sends, CONTENT)
explorer = WindowExplorer.from_frame(sends, window=WINDOW)
explorer.widget

# %% [markdown]
# The figures at the window given above, partitioning disabled, all entities:

# %%
from dedup_lib import styled

view = explorer.update(window=WINDOW, partitioning=False, entity="(all)", draw=False)
styled(view.numbers)

# %% [markdown]
# The keys with the most dropped sends. A key carrying many different messages (`messages` > 1) is a reused id: those drops are data loss.

# %%
from dedup_lib import findings

findings.top_keys(view.top_keys.head(5), WINDOW)

# %% [markdown]
# ## What the partitioning toggle changes
#
# With partitioning enabled the broker keeps one duplicate history per partition: the key is
# the effective partition key (SessionId, else PartitionKey, else MessageId) plus the
# MessageId. The same MessageId sent again under another partition key is then not a
# duplicate, and reaches consumers again. Enabling partitioning also refuses batches whose
# messages carry distinct MessageIds: they count as `rejected`, and never protect a later
# send. (On the day sample, `shipping-svc` derives its partition key from the send time and
# `payouts-svc` resends from a new session; `billing-batch` and `refunds-svc` send mixed
# batches.) The two modes at the window above, from the explorer's caches (no Spark job):

# %%
findings.partitioning_effect(explorer.caches, WINDOW, evidence)

# %% [markdown]
# Per entity, the resends caught in each mode (where the rekeyed resends fall, the caught
# ones fall and the ones reaching consumers again rise by the same number):

# %%
findings.truth_per_entity(explorer.caches, WINDOW)

# %% [markdown]
# ## What detection misses, and what it destroys
#
# The broker compares MessageIds only, and says nothing either way. Comparing content (the
# `payload_hash` column, or the columns named in `CONTENT`) shows the two silent failures:
#
# - **missed resends**: the same content accepted twice, so it reached consumers twice, with
#   why: a new MessageId per attempt, no MessageId, another partition key, detection off, or a
#   resend after the window (`longest_caught_from`: the window from which on all of them are caught);
# - **collisions**: a different message dropped because it reused an id: data loss.
#
# This runs Spark again (about half a minute on the sample).

# %%
from dedup_lib import DedupPolicy, detect_duplicates

result = detect_duplicates(sends, DedupPolicy(WINDOW)).persist()
findings.resends_missed(result, WINDOW, CONTENT)

# %%
findings.collisions_found(result, WINDOW, CONTENT)

# %% [markdown]
# ## Replay with the entities' real settings
#
# Each entity can have its own window, partitioning, or no detection at all. Point `ENTITIES`
# at your Resource Manager template (or Bicep compiled to JSON), at the output of
# `az servicebus queue show` / `topic show`, or at the emulator's `Config.json`; they are
# checked as the service would. Entities without detection accept everything, and the
# `not_checked` column says so. On an entity with both partitioning and detection the service
# refuses a batch (sends sharing a `batch_id`) whose messages do not share one SessionId,
# PartitionKey and MessageId: those are `rejected`, and never protect a later send.

# %%
from dedup_lib import shipped_with

findings.entity_settings(sends, ENTITIES or shipped_with(path, "settings"))

# %% [markdown]
# ## What other brokers would have done
#
# - **By content** (as Amazon SQS FIFO can): the key is the content, not the MessageId.
#   `only_by_content` are resends Service Bus let through; `only_by_id` are drops content would
#   have spared (mostly collisions).
# - **By count** (as ActiveMQ Artemis does, 20,000 ids by default): the history keeps the last N
#   accepted ids of each entity, for any time. Compare its memory (`ids_held`) with the time
#   windows' peak below it.

# %%
findings.content_keys(sends, WINDOW, CONTENT)

# %%
from dedup_lib import count_sweep

styled(count_sweep(sends, (1_000, 20_000, 100_000)))

# %%
findings.windows_compared(explorer.caches[False], ["PT1M", WINDOW, "PT1H", "P1D"])

# %% [markdown]
# **What to do next:** note the window where the resends you care about fall left of the line and the ids held stay affordable, then check it with `03_window_sizing`. Missed resends with a new MessageId, and collisions, are fixed in the sender, not by any window.
