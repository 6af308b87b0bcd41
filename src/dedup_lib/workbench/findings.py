"""What the notebooks say about the data, one function per section.

Each function decides from the data what its section can show: with ground truth, content,
partition keys or entity settings, the tables and charts; without, the sentence saying what is
missing and what would provide it (:class:`~dedup_lib.analysis.evidence.Evidence`). So a
notebook run on an analyst's own telemetry (no generator columns, no content, one entity, a
few hundred sends) shows sentences where the samples show figures, and never raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from dedup_lib.analysis.diagnostics import (
    collision_groups,
    collisions,
    counts_over_time,
    missed_resends,
    missed_summary,
)
from dedup_lib.analysis.evidence import Evidence
from dedup_lib.analysis.summaries import most_reused_ids, summarize
from dedup_lib.analysis.whatif import by_content, compare_keys
from dedup_lib.replay.engine import detect_duplicates
from dedup_lib.rules.durations import format_duration, parse_window
from dedup_lib.rules.policy import DedupPolicy
from dedup_lib.settings.load import load_entity_policies
from dedup_lib.spark import to_pandas
from dedup_lib.sweep.cache import ReplayCache
from dedup_lib.telemetry.loader import load_telemetry
from dedup_lib.telemetry.samples import is_shipped_sample, sample_path
from dedup_lib.text import escape
from dedup_lib.workbench import charts
from dedup_lib.workbench.section import Section

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dedup_lib.telemetry.loaded import LoadedTelemetry

__all__ = [
    "collisions_found",
    "content_keys",
    "entity_settings",
    "partitioning_effect",
    "quarantined",
    "resends_missed",
    "reused_ids",
    "rows_read",
    "telemetry_shapes",
    "top_keys",
    "truth_per_entity",
    "windows_compared",
]

Window = timedelta | float | str
#: The ground truth's figures, as a sweep of a cache gives them.
TRUTH_FIGURES = ("resends_caught", "extra_deliveries", "messages_lost")
MODES = {"disabled": False, "enabled": True}


def rows_read(loaded: LoadedTelemetry) -> Section:
    """The rows read, loaded and quarantined, then what the read did that the analyst should
    know (:attr:`~dedup_lib.telemetry.loaded.LoadedTelemetry.notes`), each as a sentence."""
    notes = (f"**Note:** {escape(note, 'markdown', limit=None)}." for note in loaded.notes)
    return Section.of(pd.DataFrame([loaded.counts()]), *notes)


def quarantined(loaded: LoadedTelemetry, n: int = 5) -> Section:
    """The quarantine by reason and its first ``n`` rows with the file each came from; or
    that no row went there."""
    reasons = loaded.quarantine_reasons()
    if reasons.empty or not int(reasons["count"].sum()):
        return Section.of("No row was quarantined: every record read is a send the replay judges.")
    wanted = ("message_id", "send_time", "reason", "source_file")
    columns = [c for c in wanted if c in loaded.quarantine.columns]
    rows = to_pandas(loaded.quarantine.select(*columns).limit(n))
    return Section.of(reasons, rows)


def reused_ids(df: DataFrame, n: int = 5) -> Section:
    """The MessageIds sent most often, or that none was sent twice."""
    ids = most_reused_ids(df, n=n)
    if ids.empty or int(ids["sends"].max()) < 2:
        return Section.of("No MessageId was sent more than once in any entity.")
    return Section.of(ids[["entity", "message_id", "sends"]])


#: The incident sample in each shape it ships in (notebook 01's tour).
SHAPES = (
    "incident.parquet",
    "incident-otlp.jsonl.gz",
    "incident-app-insights.csv.gz",
    "incident-app-insights.json.gz",
)


def telemetry_shapes(spark: SparkSession, path: str) -> Section:
    """The tour of the shapes telemetry comes in, on the shipped samples: each shape's counts,
    a trace's ids, the broker's export. Left out (one sentence) when ``path``, the notebook's
    input, is not a shipped sample: it would read files the analyst did not ask for."""
    if not is_shipped_sample(path):
        return Section.of(
            "Left out: the tour reads the shipped samples, and this notebook reads your "
            "telemetry. Leave `INPUT` at None to see it."
        )
    # Side by side: each load is one job whose gzip file one task reads, so one at a time
    # leaves a core idle (docs/decisions/spark-settings.md).
    with ThreadPoolExecutor(max_workers=len(SHAPES) + 1) as pool:
        loading = {name: pool.submit(load_telemetry, spark, sample_path(name)) for name in SHAPES}
        kept_loading = pool.submit(
            load_telemetry, spark, sample_path("incident-kept/orders.json.gz"), format="sb-explorer"
        )
        shapes = {name: done.result() for name, done in loading.items()}
        kept = kept_loading.result()
    counts = pd.DataFrame(
        [{"file": n, "format": s.format, **s.counts()} for n, s in shapes.items()]
    )
    ids = ("entity", "message_id", "send_time", "batch_id", "trace_id")
    traces = to_pandas(shapes["incident-otlp.jsonl.gz"].valid.select(*ids).limit(5))
    return Section.of(counts, traces, pd.DataFrame([{"format": kept.format, **kept.counts()}]))


def top_keys(keys: pd.DataFrame, window: Window) -> Section:
    """The keys with the most sends dropped (``View.top_keys``), or that none was."""
    if keys.empty or not int(keys["duplicates"].sum()):
        return Section.of(
            f"No send was dropped as a duplicate at {_words(window)}: no key was sent twice "
            "within the window."
        )
    unknown = None
    if "messages" not in keys:
        unknown = (
            "Whether a key carried different messages (a reused id) needs ground truth, which "
            "this input lacks; the collisions section below tells it from content."
        )
    return Section.of(keys, unknown)


def partitioning_effect(
    caches: Mapping[bool, ReplayCache], window: Window, evidence: Evidence
) -> Section:
    """The figures at ``window`` with partitioning disabled and enabled, and their difference:
    sends dropped and refused, and with ground truth the resends caught, those that reached
    consumers again and the messages lost."""
    truth = all(c.has_ground_truth for c in caches.values())
    names = ["duplicates", "rejected", *(TRUTH_FIGURES if truth else ())]
    columns = {}
    for name, mode in MODES.items():
        cache = caches[mode]
        row = cache.summarize(window).iloc[-1][["duplicates", "rejected"]]
        if truth:
            row = pd.concat([row, cache.sweep([window]).iloc[0][list(TRUTH_FIGURES)]])
        columns[name] = row[names]
    table = pd.DataFrame(columns).astype("int64")
    table["difference"] = table["enabled"] - table["disabled"]
    same = not table["difference"].any()
    said = None
    if same:
        said = evidence.lacks("partition keys", "which sends are duplicates") or (
            f"Partitioning changes nothing here at {_words(window)}: no MessageId was sent "
            "under two partition keys or sessions, and no batch mixed them."
        )
    what = "which of these drops were resends and which destroyed a message"
    return Section.of(
        table.rename_axis(f"at {_words(window)}").reset_index(),
        said,
        evidence.lacks("ground truth", what),
    )


def truth_per_entity(caches: Mapping[bool, ReplayCache], window: Window) -> Section:
    """Per entity, the resends and those caught with partitioning disabled and enabled."""
    if not all(c.has_ground_truth for c in caches.values()):
        return Section.of(
            Evidence.of(()).lacks("ground truth", "how many resends each entity's window caught")
        )
    off, on = (caches[mode].ground_truth_summary(window) for mode in (False, True))
    table = off[["entity", "resends", "resends_caught"]].merge(
        on[["entity", "resends_caught"]], on="entity", suffixes=("", "_partitioned")
    )
    return Section.of(table)


def resends_missed(
    judged: DataFrame, window: Window, content: str | Sequence[str] | None = None
) -> Section:
    """Resends that reached consumers again (the same content accepted twice), per entity and
    cause, and over time by cause; or what the input lacks to tell them."""
    evidence = Evidence.of(judged, content)
    lacking = evidence.lacks("content", "which resends reached consumers again")
    if lacking:
        return Section.of(lacking)
    misses = missed_resends(judged, evidence.content)
    table = missed_summary(misses).drop(columns="median_delay")
    if table.empty:
        return Section.of(
            f"No resend reached consumers again at {_words(window)}: every send whose content "
            "had been delivered before was dropped."
        )
    by_cause = counts_over_time(misses, "miss_cause", "PT30M")
    title = f"Missed resends at {_words(window)}, by cause"
    fig = charts.counts_over_time(by_cause, "miss_cause", title=title, what="resends")
    return Section.of(table, fig)


def collisions_found(
    judged: DataFrame, window: Window, content: str | Sequence[str] | None = None
) -> Section:
    """Different messages dropped because they reused an id (data loss), by sender and id
    pattern, and over time by pattern; or that there were none, or what the input lacks."""
    evidence = Evidence.of(judged, content)
    lacking = evidence.lacks("content", "which dropped sends carried a different message")
    if lacking:
        return Section.of(lacking)
    lost = collisions(judged, evidence.content)
    groups = collision_groups(lost)
    if groups.empty:
        return Section.of(
            f"No message was lost at {_words(window)}: every send dropped as a duplicate "
            "carried the same content as the one it repeated."
        )
    by_pattern = counts_over_time(lost, "id_pattern", "PT30M")
    title = "Different messages dropped as duplicates (collisions), by id pattern"
    fig = charts.counts_over_time(by_pattern, "id_pattern", title=title, what="messages lost")
    return Section.of(groups, fig)


def entity_settings(df: DataFrame, paths: str | Path | Sequence[str | Path] | None) -> Section:
    """Each entity's settings read from ``paths`` (a file or several: ARM, az, emulator) and
    the verdicts per entity replayed with them; or how to give them."""
    if isinstance(paths, str | Path):
        paths = [paths]
    if not paths:
        return Section.of(
            "No entity settings were given, so every entity is replayed with the one window "
            "above. Set `ENTITIES` to your Resource Manager template (or Bicep compiled to "
            "JSON), the output of `az servicebus queue show` / `topic show`, or the "
            "emulator's `Config.json`, to replay each entity with its own."
        )
    policies = load_entity_policies(paths)
    described = sorted(
        (name, "detection off" if p is None else p.describe()) for name, p in policies.items()
    )
    settings = pd.DataFrame(described, columns=["entity", "settings"])
    return Section.of(settings, summarize(detect_duplicates(df, policies)))


def content_keys(
    df: DataFrame, window: Window, content: str | Sequence[str] | None = None
) -> Section:
    """The same window keyed by content instead of MessageId, beside Service Bus's verdicts."""
    evidence = Evidence.of(df, content)
    lacking = evidence.lacks("content", "what a content key would have caught")
    if lacking:
        return Section.of(lacking)
    policy = DedupPolicy(parse_window(window))
    return Section.of(compare_keys(by_content(df, policy, evidence.content)))


def windows_compared(cache: ReplayCache, windows: Sequence[Window]) -> Section:
    """A few windows side by side: ids held at the peak, sends dropped, and with ground truth
    the resends caught and messages lost; without it, the sentence saying so."""
    sweep = cache.sweep(list(windows)).drop_duplicates("window_s")
    wanted = ("window_s", "peak_held", "duplicates", "resends_caught", "messages_lost")
    lacking = None
    if not cache.has_ground_truth:
        lacking = Evidence.of(()).lacks("ground truth", "how many of those drops were resends")
    return Section.of(sweep[[c for c in wanted if c in sweep]], lacking)


def _words(window: Window) -> str:
    """A window as prose: ``a 10m window``."""
    return f"a {format_duration(parse_window(window).total_seconds())} window"
