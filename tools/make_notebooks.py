"""Write the workbench notebooks in notebooks/ (sources, no outputs).

Kept as code so their cells stay short and reviewable; `make notebooks` rewrites them, then
stores the outputs of the cells marked NBVAL_CHECK_OUTPUT (see tools/store_checked_outputs.py).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHECK = "# NBVAL_CHECK_OUTPUT\n"


def md(text: str):
    return new_markdown_cell(text.strip())


def code(text: str, *, tags: list[str] | None = None):
    cell = new_code_cell(text.strip())
    if tags:
        cell.metadata["tags"] = tags
    return cell


def write(name: str, cells: list) -> None:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, NOTEBOOKS / name)


SETUP = """
from dedup_lib import get_spark

spark = get_spark()  # local Spark on all cores; set SPARK_REMOTE to use a Spark Connect server
"""

write(
    "01_load_telemetry.ipynb",
    [
        md("""
# 1. Load message telemetry

Point this notebook at a file or a folder of sends (Parquet, CSV or JSON Lines). It shows
how the columns were mapped onto the canonical schema, how many rows were loaded and how many
went to the quarantine (and why), the traffic per entity over time, and the quality of the
MessageIds: sends without one, GUID-looking ids, and the ids used most often.

**What to do next:** if many rows are quarantined, fix the mapping or the source; if ids look
reused or constant, expect `02_window_explorer` to show legitimate messages being dropped.
"""),
        code(SETUP),
        md(
            "Change `PATH` to your telemetry. It defaults to a day of synthetic sends shipped with the workbench."
        ),
        code("""
from dedup_lib import load_telemetry, sample_path

PATH = sample_path("day-azure.csv.gz")
loaded = load_telemetry(spark, PATH)
loaded.mapping
"""),
        md("Rows read, loaded and quarantined. Valid plus quarantined is always what was read."),
        code(CHECK + "print(loaded.counts())"),
        code(CHECK + "print(loaded.quarantine_reasons().to_string(index=False))"),
        md("A few quarantined rows, with the reason and the file they came from:"),
        code("loaded.quarantine.limit(5).toPandas()"),
        md(
            "### Traffic per entity\nSends per 10 minutes. Quiet hours and bursts show here; they decide how many ids a window holds."
        ),
        code("""
from dedup_lib import charts, sends_over_time

charts.show(charts.sends_per_entity(sends_over_time(loaded.valid, bucket="PT10M")))
"""),
        md("""
### Id quality
`without_message_id`: sends the service gives a fresh id, so detection cannot protect them.
`guid_like`: ids shaped like GUIDs; fine when one GUID is kept per message, useless when a new
one is made per attempt. `sends_per_id` well above 1 on an entity means ids are reused.
"""),
        code(
            CHECK
            + """
from dedup_lib import id_quality

print(id_quality(loaded.valid).to_string(index=False))
"""
        ),
        md(
            "The ids sent most often. A constant id (all zeros) or a small pool of ids is a bug that makes the broker drop different messages silently."
        ),
        code(
            CHECK
            + """
from dedup_lib import most_reused_ids

print(most_reused_ids(loaded.valid, n=5)[["entity", "message_id", "sends"]].to_string(index=False))
"""
        ),
    ],
)

write(
    "02_window_explorer.ipynb",
    [
        md("""
# 2. Window explorer

Replays Service Bus duplicate detection over the telemetry with the window and partitioning
mode you choose. Spark runs once, when the explorer is built (about half a minute on the
200 k-send sample); after that every control answers from memory.

- **window**: drag the slider (20 s to 7 days, log scale) or type `PT10M`, `10m` or `0:10:00`;
- **partitioning**: with it enabled the key is MessageId plus the partition key;
- **entity** and **time**: narrow the charts and numbers (verdicts are always computed over
  all the data, as the broker sees it).

The charts: sends and the duplicates the broker drops over time; the delay of every resend
after the previous send with the same key, with the window drawn (left of the line is caught,
right of it reaches consumers again), coloured by cause where the data has ground truth; and
the ids held in the duplicate history, the throughput cost of the window.
"""),
        code(SETUP),
        code("""
from dedup_lib import WindowExplorer, load_telemetry, sample_path

loaded = load_telemetry(spark, sample_path("day.parquet"))
explorer = WindowExplorer.from_frame(loaded.valid, window="PT10M")
explorer.update()
explorer.widget
"""),
        md("The figures at the default window of 10 minutes, partitioning disabled, all entities:"),
        code(
            CHECK
            + """
view = explorer.update(window="PT10M", partitioning=False, entity="(all)", draw=False)
print(view.numbers.to_string(index=False))
"""
        ),
        md(
            "The keys with the most dropped sends. A key carrying many different messages (`messages` > 1) is a reused id: those drops are data loss."
        ),
        code(CHECK + "print(view.top_keys.head(5).to_string(index=False))"),
        md("""
## What detection misses, and what it destroys

The broker compares MessageIds only, and says nothing either way. Comparing content (here the
`payload_hash` column; pass `content=[...]` to name your own columns) shows the two silent
failures at 10 minutes:

- **missed resends**: the same content accepted twice, so it reached consumers twice, with
  why: a new MessageId per attempt, no MessageId, another partition key, detection off, or a
  resend after the window (`longest_caught_from`: the window from which on all of them are caught);
- **collisions**: a different message dropped because it reused an id: data loss.

This runs Spark again (about half a minute on the sample).
"""),
        code("""
from dedup_lib import DedupPolicy, collisions, detect_duplicates, missed_resends

judged = detect_duplicates(loaded.valid, DedupPolicy("PT10M")).persist()
misses = missed_resends(judged).persist()
lost = collisions(judged).persist()
"""),
        code(
            CHECK
            + """
from dedup_lib import missed_summary

print(missed_summary(misses).drop(columns="median_delay").to_string(index=False))
"""
        ),
        code("""
from dedup_lib import charts, counts_over_time

title = "Missed resends at a 10-minute window, by cause"
by_cause = counts_over_time(misses, "miss_cause", "PT30M")
charts.show(charts.counts_over_time(by_cause, "miss_cause", title=title, what="resends"))
"""),
        code(
            CHECK
            + """
from dedup_lib import collision_groups

print(collision_groups(lost).to_string(index=False))
"""
        ),
        code("""
title = "Different messages dropped as duplicates (collisions), by id pattern"
by_pattern = counts_over_time(lost, "id_pattern", "PT30M")
charts.show(charts.counts_over_time(by_pattern, "id_pattern", title=title, what="messages lost"))
"""),
        md("""
## Replay with the entities' real settings

Each entity can have its own window, partitioning, or no detection at all. Point
`load_entity_policies` at your Resource Manager template (or Bicep compiled to JSON), at the
output of `az servicebus queue show` / `topic show`, or at the emulator's `Config.json`; it
checks the settings as the service would. Entities without detection accept everything, and
the `not_checked` column says so.
"""),
        code(
            CHECK
            + """
from dedup_lib import load_entity_policies, summarize

policies = load_entity_policies(sample_path("entities-arm.json"))
for name, p in sorted(policies.items()):
    print(f"{name:14s} {'detection off' if p is None else p.describe()}")
print()
print(summarize(detect_duplicates(loaded.valid, policies)).to_string(index=False))
"""
        ),
        md("""
## What other brokers would have done

- **By content** (as Amazon SQS FIFO can): the key is the content, not the MessageId.
  `only_by_content` are resends Service Bus let through; `only_by_id` are drops content would
  have spared (mostly collisions).
- **By count** (as ActiveMQ Artemis does, 20,000 ids by default): the history keeps the last N
  accepted ids of each entity, for any time. Compare its memory (`ids_held`) with the time
  windows' peak below it.
"""),
        code(
            CHECK
            + """
from dedup_lib import by_content, compare_keys

print(compare_keys(by_content(loaded.valid, DedupPolicy("PT10M"))).to_string(index=False))
"""
        ),
        code(
            CHECK
            + """
from dedup_lib import count_sweep

print(count_sweep(loaded.valid, (1_000, 20_000, 100_000)).to_string(index=False))
windows = explorer.caches[False].sweep(["PT1M", "PT10M", "PT1H", "P1D"])
print(windows[["window_s", "peak_held", "duplicates", "resends_caught", "messages_lost"]].to_string(index=False))
"""
        ),
        md(
            "**What to do next:** note the window where the resends you care about fall left of the line and the ids held stay affordable, then check it with `03_window_sizing`. Missed resends with a new MessageId, and collisions, are fixed in the sender, not by any window."
        ),
    ],
)

write(
    "03_window_sizing.ipynb",
    [
        md("""
# 3. Sizing the window

Sweeps the window over 50 values from 20 s to 7 days, for both partitioning modes, and plots
what each one catches (the share of true resends dropped as duplicates), what it destroys
(distinct messages dropped and never delivered) and what it costs (the most ids held at once).
It then picks the smallest window that catches the target share of the resends a window *can*
catch: those sent again with an id already used. Resends with a fresh id per attempt, or
without an id, escape every window; the top panel shows them as the gap between its lines.

The sweep answers from one Spark pass per mode; its figures are exactly what
`detect_duplicates` gives at each window.
"""),
        code(SETUP),
        code("""
from dedup_lib import ReplayCache, load_telemetry, sample_path

TARGET = 0.99  # share of the catchable resends (same id as an earlier send) to catch
loaded = load_telemetry(spark, sample_path("day.parquet"))
caches = {mode: ReplayCache.build(loaded.valid, mode) for mode in (False, True)}
sweeps = {mode: cache.sweep() for mode, cache in caches.items()}
"""),
        code("""
from dedup_lib import charts, smallest_window

for mode, sweep in sweeps.items():
    best = smallest_window(sweep, TARGET)
    title = f"Window sweep, partitioning {'enabled' if mode else 'disabled'}"
    chosen = None if best is None else best["window_s"]
    charts.show(charts.window_sweep(sweep, target=TARGET, chosen_s=chosen, title=title))
"""),
        md(
            "The smallest window reaching the target, per mode, with what it loses and costs. When that window is hours long, the late resends are replays: catching them costs messages lost to reused ids and a large history. Often the better fix is in the sender (keep one MessageId per message, make replays idempotent downstream)."
        ),
        code(
            CHECK
            + """
for mode, sweep in sweeps.items():
    best = smallest_window(sweep, TARGET)
    if best is None:
        reached = "no window reaches the target"
    else:
        reached = (
            f"{format_duration(best['window_s'])} catches"
            f" {best['share_catchable_caught']:.1%} of {int(best['catchable_resends']):,}"
            f" catchable resends ({best['share_resends_caught']:.1%} of all"
            f" {int(best['resends']):,}); {int(best['messages_lost']):,} messages lost,"
            f" {int(best['peak_held']):,} ids at the peak"
        )
    default = caches[mode].sweep(["PT10M"]).iloc[0]
    print(f"partitioning {'enabled ' if mode else 'disabled'}: {reached}")
    print(
        f"  for comparison, 10m catches {default['share_catchable_caught']:.1%}"
        f" and loses {int(default['messages_lost']):,} messages"
    )
"""
        ),
    ],
)

write(
    "04_incident_postmortem.ipynb",
    [
        md("""
# 4. Incident postmortem

Did the retries during the incident reach the consumers twice? This notebook replays the
broker's duplicate detection over the telemetry of an incident and tells what was resent,
what the broker dropped, what reached consumers twice and what would have been lost.

Run it here, or headless: `make postmortem INPUT=path/to/sends WINDOW=PT10M` writes a
self-contained HTML report under `reports/`.
"""),
        code(
            """
INPUT = None  # telemetry of the incident; None: the shipped incident sample
WINDOW = "PT10M"  # the entity's duplicateDetectionHistoryTimeWindow
PARTITIONING = False  # enablePartitioning of the entity
ENTITY = "(all)"  # one queue or topic, or "(all)"
START = None  # ISO 8601 start of the incident, None: from the first send
END = None  # ISO 8601 end, None: to the last send
EMBED_CHARTS = False  # True in headless runs: charts carry plotly.js, so the HTML works offline
""",
            tags=["parameters"],
        ),
        code(SETUP),
        code("""
from dedup_lib import DedupPolicy, ReplayCache, load_telemetry, sample_path

path = INPUT or sample_path("incident.parquet")
policy = DedupPolicy(WINDOW, partitioning=PARTITIONING)
loaded = load_telemetry(spark, path)
counts = loaded.counts()
carry = tuple(c for c in ("cause",) if c in loaded.valid.columns)
cache = ReplayCache.build(loaded.valid, PARTITIONING, carry=carry)
"""),
        code(
            CHECK
            + """
name = path.rsplit("/", 1)[-1]
print(f"{name}: {counts['read']:,} sends read, {counts['quarantined']:,} quarantined")
print(policy.describe())
"""
        ),
        md(
            "## What the broker did\nVerdicts per entity at this window, over the whole input (the broker saw all of it)."
        ),
        code(CHECK + "print(cache.summary(policy.window).to_string(index=False))"),
        md(
            "## What reached consumers twice, and what was lost\nWith ground truth (which sends are resends of which message) the replay says how many resends were caught, how many slipped through, and how many distinct messages the broker dropped without a trace."
        ),
        code(
            CHECK
            + """
if cache.has_ground_truth:
    total = cache.truth_summary(policy.window).iloc[-1]
    print(
        f"{total.resends:,} resends: {total.resends_caught:,} caught,"
        f" {total.extra_deliveries:,} reached consumers again;"
        f" {total.messages_lost:,} messages lost"
    )
else:
    print("no ground truth in this input: see the delays chart for resends by timing")
"""
        ),
        md(
            "## Over the incident\nSends and the duplicates dropped, minute by minute; then how long after the previous send each resend came (left of the dashed line: caught)."
        ),
        code("""
import pandas as pd
from dedup_lib import charts

def during(table, column="time"):
    keep = table["entity"].eq(ENTITY) | (ENTITY == "(all)")
    if START:
        keep &= table[column] >= pd.Timestamp(START, tz="UTC")
    if END:
        keep &= table[column] <= pd.Timestamp(END, tz="UTC")
    return table[keep]

window_s = policy.window.total_seconds()
delays = cache.resend_delays()
title = f"Sends and dropped duplicates during the incident, window {format_duration(window_s)}"
charts.show(charts.sends_over_time(during(cache.over_time(window_s)), title=title), embed=EMBED_CHARTS)
charts.show(charts.resend_delays(during(delays), window_s), embed=EMBED_CHARTS)
charts.show(charts.ids_held(during(cache.held_over_time(window_s)), window_s), embed=EMBED_CHARTS)
"""),
        md("""
## What reached consumers twice, by content, and what was destroyed

Without relying on ground truth: sends whose content (`payload_hash`) had already been
delivered (missed resends, with why), and different messages dropped because they reused an
id (collisions). Over the incident's entity and time range.
"""),
        code(
            CHECK
            + """
from dedup_lib import collision_groups, collisions, detect_duplicates, missed_resends, missed_summary, narrow

if "payload_hash" in loaded.valid.columns:
    judged = detect_duplicates(loaded.valid, policy).persist()
    misses = narrow(missed_resends(judged), ENTITY, START, END).persist()
    lost = narrow(collisions(judged), ENTITY, START, END)
    print(missed_summary(misses).drop(columns="median_delay").to_string(index=False))
    print()
    groups = collision_groups(lost)
    print(groups.to_string(index=False) if len(groups) else "no collisions: no message was lost to a reused id")
else:
    misses = None
    print("no payload_hash column: name the content columns with missed_resends(..., content=[...])")
"""
        ),
        code("""
from dedup_lib import counts_over_time

if misses is not None:
    title = f"Resends that reached consumers again, by cause, window {format_duration(window_s)}"
    by_cause = counts_over_time(misses, "miss_cause", "PT5M")
    fig = charts.counts_over_time(by_cause, "miss_cause", title=title, what="resends")
    charts.show(fig, embed=EMBED_CHARTS)
"""),
        md("## Would another window have helped?"),
        code(
            CHECK
            + """
sweep = cache.sweep(["PT20S", "PT1M", "PT5M", WINDOW, "PT1H", "P1D"]).drop_duplicates("window_s")
wanted = ("window_s", "duplicates", "resends_caught", "extra_deliveries", "messages_lost", "peak_held")
columns = [c for c in wanted if c in sweep]
print(sweep[columns].to_string(index=False))
"""
        ),
        md(
            "**Reading it:** resends that came later than the window after their original reached consumers again; if a longer window catches them without losing messages (reused ids) or holding too many ids, propose it. Resends with a new MessageId per attempt are not caught by any window: the sender must keep its id."
        ),
    ],
)
print("written")
