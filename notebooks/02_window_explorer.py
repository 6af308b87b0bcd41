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
# while you use it (the toggle offers it when ready). After that every control answers from
# memory and redraws the charts in place.
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
# Set `INPUT` below to your telemetry (or run it headless: `papermill 02_window_explorer.ipynb out.ipynb -p INPUT sends.parquet`).
# It defaults to the 200 k-send day sample.

# %% tags=["parameters"]
INPUT = None  # your telemetry, a file or a folder; None: the shipped day sample

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import WindowExplorer, load_telemetry, sample_path

loaded = load_telemetry(spark, INPUT or sample_path("day.parquet"))
explorer = WindowExplorer.from_frame(loaded.valid, window="PT10M")
explorer.widget

# %% [markdown]
# The figures at the default window of 10 minutes, partitioning disabled, all entities:

# %%
from dedup_lib import styled

view = explorer.update(window="PT10M", partitioning=False, entity="(all)", draw=False)
styled(view.numbers)

# %% [markdown]
# The keys with the most dropped sends. A key carrying many different messages (`messages` > 1) is a reused id: those drops are data loss.

# %%
styled(view.top_keys.head(5))

# %% [markdown]
# ## What the partitioning toggle changes
#
# With partitioning enabled the broker keeps one duplicate history per partition: the key is
# the effective partition key (SessionId, else PartitionKey, else MessageId) plus the
# MessageId. The same MessageId sent again under another partition key is then not a
# duplicate, and reaches consumers again. Two senders of the sample do this: `shipping-svc`
# derives its partition key from the send time, so each retry and resend lands under another
# key; `payouts-svc`'s resends after a crash come from another instance, which opens a new
# session. Enabling partitioning also refuses batches whose messages carry distinct
# MessageIds (`billing-batch`, `refunds-svc`): they count as `rejected`, and never protect a
# later send. The two modes at 10 minutes, from the explorer's caches (no Spark job):

# %%
import pandas as pd

figures = ["duplicates", "resends_caught", "extra_deliveries", "messages_lost"]
modes = {"disabled": False, "enabled": True}
side_by_side = pd.DataFrame(
    {name: explorer.caches[mode].sweep(["PT10M"]).iloc[0][figures] for name, mode in modes.items()}
).astype("int64")
side_by_side["difference"] = side_by_side["enabled"] - side_by_side["disabled"]
styled(side_by_side.rename_axis("at 10 minutes").reset_index())

# %% [markdown]
# Per entity: the resends caught fall where those senders send (`orders`, `payments`), and
# the resends that reached consumers again rise by the same number.

# %%
truth = {name: explorer.caches[mode].truth_summary("PT10M") for name, mode in modes.items()}
per_entity = truth["disabled"][["entity", "resends", "resends_caught"]].merge(
    truth["enabled"][["entity", "resends_caught"]], on="entity", suffixes=("", "_partitioned")
)
styled(per_entity)

# %% [markdown]
# ## What detection misses, and what it destroys
#
# The broker compares MessageIds only, and says nothing either way. Comparing content (here the
# `payload_hash` column; pass `content=[...]` to name your own columns) shows the two silent
# failures at 10 minutes:
#
# - **missed resends**: the same content accepted twice, so it reached consumers twice, with
#   why: a new MessageId per attempt, no MessageId, another partition key, detection off, or a
#   resend after the window (`longest_caught_from`: the window from which on all of them are caught);
# - **collisions**: a different message dropped because it reused an id: data loss.
#
# This runs Spark again (about half a minute on the sample).

# %%
from dedup_lib import DedupPolicy, collisions, detect_duplicates, missed_resends

judged = detect_duplicates(loaded.valid, DedupPolicy("PT10M")).persist()
misses = missed_resends(judged).persist()
lost = collisions(judged).persist()

# %%
from dedup_lib import missed_summary

styled(missed_summary(misses).drop(columns="median_delay"))

# %%
from dedup_lib import charts, counts_over_time

title = "Missed resends at a 10-minute window, by cause"
by_cause = counts_over_time(misses, "miss_cause", "PT30M")
charts.show(charts.counts_over_time(by_cause, "miss_cause", title=title, what="resends"))

# %%
from dedup_lib import collision_groups

styled(collision_groups(lost))

# %%
title = "Different messages dropped as duplicates (collisions), by id pattern"
by_pattern = counts_over_time(lost, "id_pattern", "PT30M")
charts.show(charts.counts_over_time(by_pattern, "id_pattern", title=title, what="messages lost"))

# %% [markdown]
# ## Replay with the entities' real settings
#
# Each entity can have its own window, partitioning, or no detection at all. Point
# `load_entity_policies` at your Resource Manager template (or Bicep compiled to JSON), at the
# output of `az servicebus queue show` / `topic show`, or at the emulator's `Config.json`; it
# checks the settings as the service would. Entities without detection accept everything, and
# the `not_checked` column says so. On an entity with both partitioning and detection
# (`payments` here) the service refuses a batch (sends sharing a `batch_id`) whose messages do
# not share one SessionId, PartitionKey and MessageId: the batches of `billing-batch` and
# `refunds-svc` are all `rejected`, and never protect a later send.

# %%
import pandas as pd

from dedup_lib import load_entity_policies, summarize

policies = load_entity_policies(sample_path("entities-arm.json"))
described = [(n, "detection off" if p is None else p.describe()) for n, p in policies.items()]
styled(pd.DataFrame(sorted(described), columns=["entity", "settings"]))

# %%
styled(summarize(detect_duplicates(loaded.valid, policies)))

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
from dedup_lib import by_content, compare_keys

styled(compare_keys(by_content(loaded.valid, DedupPolicy("PT10M"))))

# %%
from dedup_lib import count_sweep

styled(count_sweep(loaded.valid, (1_000, 20_000, 100_000)))

# %%
windows = explorer.caches[False].sweep(["PT1M", "PT10M", "PT1H", "P1D"])
styled(windows[["window_s", "peak_held", "duplicates", "resends_caught", "messages_lost"]])

# %% [markdown]
# **What to do next:** note the window where the resends you care about fall left of the line and the ids held stay affordable, then check it with `03_window_sizing`. Missed resends with a new MessageId, and collisions, are fixed in the sender, not by any window.
