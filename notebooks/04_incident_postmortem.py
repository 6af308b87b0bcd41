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
INPUT = None  # telemetry of the incident; None: the shipped incident sample
WINDOW = "PT10M"  # the entity's duplicateDetectionHistoryTimeWindow
PARTITIONING = False  # enablePartitioning of the entity
ENTITY = "(all)"  # one queue or topic, or "(all)"
START = None  # ISO 8601 start of the incident, None: from the first send
END = None  # ISO 8601 end, None: to the last send
EMBED_CHARTS = False  # True in headless runs: charts carry plotly.js, so the HTML works offline
KEPT = None  # what the broker kept (a Service Bus Explorer export); None: the sample's
KEPT_FORMAT = None  # its format, None: recognised from the content

# %%
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server

# %%
from dedup_lib import DedupPolicy, ReplayCache, load_telemetry, sample_path

path = INPUT or sample_path("incident.parquet")
policy = DedupPolicy(WINDOW, partitioning=PARTITIONING)
loaded = load_telemetry(spark, path)
counts = loaded.counts()
carry = tuple(c for c in ("cause",) if c in loaded.valid.columns)
cache = ReplayCache.build(loaded.valid, PARTITIONING, carry=carry)

# %% [markdown] tags=["notebook-only"]
# The report's title and summary: what reached consumers again and what was lost, over the
# entity and time range of the parameters, and the window that would have caught the late
# resends, rounded up to one a person would configure, with what it would have lost.

# %%
import pandas as pd
from IPython.display import Markdown, display

from dedup_lib import (
    collision_groups,
    collisions,
    configurable_window,
    detect_duplicates,
    escape,
    format_window,
    missed_resends,
    missed_summary,
    narrow,
)

AFTER_THE_WINDOW = "after the window"  # the miss_cause of a resend later than the window
window_words = f"`{format_window(policy.window, 'iso')}` ({format_window(policy.window, 'words')})"
buckets = narrow(cache.over_time(policy.window), ENTITY, START, END, time="time")["time"]
first, last = (buckets.min(), buckets.max()) if len(buckets) else (START, END)
start_text = f"{pd.Timestamp(START or first):%Y-%m-%d %H:%M}" if START or first else "the start"
end_text = f"{pd.Timestamp(END or last):%Y-%m-%d %H:%M}" if END or last else "the end"
where = "all entities" if ENTITY == "(all)" else escape(ENTITY, "text")  # data, as text
report_title = (
    f"Incident postmortem: {where}, window {format_window(policy.window, 'iso')},"
    f" {start_text} to {end_text} UTC"
)
in_words = escape(where, "markdown", limit=None)


def lost_at(policy):
    """Distinct messages dropped because they reused an id, over the entity and range."""
    return narrow(collisions(detect_duplicates(loaded.valid, policy)), ENTITY, START, END).count()


if "payload_hash" in loaded.valid.columns:
    judged = detect_duplicates(loaded.valid, policy).persist()
    misses = narrow(missed_resends(judged), ENTITY, START, END).persist()
    lost = narrow(collisions(judged), ENTITY, START, END)
    missed = missed_summary(misses)
    groups = collision_groups(lost)
    again, lost_now = int(missed["resends"].sum()), int(groups["sends_dropped"].sum())
    late = missed[missed["miss_cause"] == AFTER_THE_WINDOW]
    said = [
        f"On {in_words} from {start_text} to {end_text} UTC, replayed at the window"
        f" {window_words} with partitioning {'enabled' if PARTITIONING else 'disabled'},"
        f" **{again:,} resends reached consumers again** (sends whose content had already"
        f" been delivered) and **{lost_now:,} messages were lost** (dropped as duplicates"
        " of a different message that reused their id)."
    ]
    if late.empty:
        said.append(
            "None of those resends came after the window, so no longer window would have"
            " prevented them: they had a new MessageId, none, or another partition key."
        )
    elif late["longest_caught_from"].max() > 7 * 86400:
        said.append(
            f"{int(late['resends'].sum()):,} came after the window, some later than the 7"
            " days Service Bus allows: no window would have prevented all of them."
        )
    else:
        better = configurable_window(late["longest_caught_from"].max())
        said.append(
            f"{int(late['resends'].sum()):,} came after the window; a window of"
            f" `{format_window(better, 'iso')}` ({format_window(better, 'words')}) would"
            " have prevented them, and lost"
            f" {lost_at(DedupPolicy(better, partitioning=PARTITIONING)):,} messages."
        )
    summary = " ".join(said)
else:
    misses = lost = None
    summary = (
        f"On {in_words} from {start_text} to {end_text} UTC, replayed at the window"
        f" {window_words}: the input has no `payload_hash` column, so which resends reached"
        " consumers again is not known from their content; see the delays chart for resends"
        " by timing."
    )
heading = escape(report_title, "markdown", limit=None)
display(Markdown(f"# {heading}\n\n{summary}"), metadata={"dedup_lib": {"title": report_title}})

# %%
from dedup_lib import styled

name = path.rsplit("/", 1)[-1]
styled(pd.DataFrame([{"input": name, **counts, "replayed with": policy.describe()}]))

# %% [markdown]
# ## What the broker did
# Verdicts per entity at this window, over the whole input (the broker saw all of it).

# %%
styled(cache.summary(policy.window))

# %% [markdown]
# ## What reached consumers twice, and what was lost
# With ground truth (which sends are resends of which message) the replay says how many resends were caught, how many slipped through, and how many distinct messages the broker dropped without a trace.

# %%
if cache.has_ground_truth:
    total = cache.truth_summary(policy.window).iloc[-1]
    print(
        f"{total.resends:,} resends: {total.resends_caught:,} caught,"
        f" {total.extra_deliveries:,} reached consumers again;"
        f" {total.messages_lost:,} messages lost"
    )
else:
    print("no ground truth in this input: see the delays chart for resends by timing")

# %% [markdown]
# ## Over the incident
# Sends and the duplicates dropped, minute by minute; then how long after the previous send each resend came (left of the dashed line: caught).

# %%
from dedup_lib import charts, format_duration


def during(table):
    return narrow(table, ENTITY, START, END, time="time")


window_s = policy.window.total_seconds()
span = f"on {where} between {start_text} and {end_text} UTC"
title = f"Sends and dropped duplicates during the incident, window {format_duration(window_s)}"
over_time = during(cache.over_time(window_s))
charts.show(charts.sends_over_time(over_time, title=title, scope=span), embed=EMBED_CHARTS)
delays = during(cache.resend_delays())
charts.show(charts.resend_delays(delays, window_s, scope=span), embed=EMBED_CHARTS)
held = during(cache.held_over_time(window_s))
charts.show(charts.ids_held(held, window_s, scope=span), embed=EMBED_CHARTS)

# %% [markdown]
# ## What reached consumers twice, by content, and what was destroyed
#
# Without relying on ground truth: sends whose content (`payload_hash`) had already been
# delivered (missed resends, with why), and different messages dropped because they reused an
# id (collisions). Over the incident's entity and time range.

# %%
if misses is not None:
    shown = styled(missed.drop(columns="median_delay"))
else:
    shown = Markdown("The input has no `payload_hash` column: resends are not matched by content.")
shown

# %%
if lost is None:
    shown = None
else:
    no_loss = "no collisions: no message was lost to a reused id"
    shown = styled(groups) if len(groups) else Markdown(no_loss)
shown

# %%
from dedup_lib import counts_over_time

if misses is not None:
    title = f"Resends that reached consumers again, by cause, window {format_duration(window_s)}"
    by_cause = counts_over_time(misses, "miss_cause", "PT5M")
    fig = charts.counts_over_time(by_cause, "miss_cause", title=title, what="resends", scope=span)
    charts.show(fig, embed=EMBED_CHARTS)

# %% [markdown]
# ## Would another window have helped?

# %%
sweep = cache.sweep(["PT20S", "PT1M", "PT5M", WINDOW, "PT1H", "P1D"]).drop_duplicates("window_s")
wanted = (
    "window_s",
    "duplicates",
    "resends_caught",
    "extra_deliveries",
    "messages_lost",
    "peak_held",
)
columns = [c for c in wanted if c in sweep]
styled(sweep[columns])

# %% [markdown]
# **Reading it:** resends that came later than the window after their original reached consumers again; if a longer window catches them without losing messages (reused ids) or holding too many ids, propose it. Resends with a new MessageId per attempt are not caught by any window: the sender must keep its id.

# %% [markdown]
# ## Check against the broker
# An export of the entity (what Service Bus Explorer saves of its messages) lists what the broker kept, never what it dropped. Matching each kept message to its send tells whether the broker's real window agrees with the replay's: **contradictions** are kept messages the replay drops (the real window is shorter, or detection is off), **unexplained** ones have no send in the telemetry, **pairs** are two kept messages of one key inside the window.

# %% [markdown] tags=["notebook-only"]
# The shipped sample's export is what the broker kept of `orders` when its real window was one minute: replayed at ten, the check finds the difference and names the window that agrees. For your own entity, save its messages with Service Bus Explorer (select them, *Save*; or a peek) and set `KEPT` to that file, or pass `--kept` to `dedup-lib postmortem`.

# %%
from IPython.display import Markdown

from dedup_lib import detect_duplicates, reconcile

kept_path = KEPT or (None if INPUT else sample_path("incident-kept/orders.json.gz"))
if kept_path is None:
    checked = None
    shown = Markdown(
        "No export of what the broker kept was given, so the replay is not checked against"
        " the broker."
    )
else:
    kept = load_telemetry(spark, kept_path, format=KEPT_FORMAT).valid
    replayed = detect_duplicates(loaded.valid, policy)
    checked = reconcile(replayed, kept, policy, entity=ENTITY, start=START, end=END)
    shown = styled(checked.summary())
shown

# %%
Markdown(escape(checked.verdict(), "markdown", limit=None)) if checked is not None else None

# %% [markdown]
# The contradictions, first twenty: `gap_s` is how long after the original the replay matched it with each came; where `original_kept` is true the broker kept that original too, so its window is at most that gap.

# %%
if checked is not None and checked.counts()["contradictions"]:
    columns = ["entity", "message_id", "send_time", "replay_verdict", "gap_s", "original_kept"]
    shown = styled(checked.table("contradictions")[columns])
else:
    shown = None
shown
