"""``dedup-lib simulate``: load telemetry, replay detection, print the verdicts per entity, and
what the broker never reports (missed resends, collisions) when the content is known."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from dedup_lib.cli.options import (
    TELEMETRY_FORMATS,
    CommandError,
    add_column_mapping,
    column_mapping,
    content_columns,
    entity_name,
    existing_input,
    window_policy,
    writable_target,
)
from dedup_lib.cli.terminal import Progress, describe, print_note, start_spark, text_table
from dedup_lib.errors import printable
from dedup_lib.replay.kernels import KERNELS
from dedup_lib.rules.durations import format_duration, format_window
from dedup_lib.rules.policy import WINDOW_BOUNDS, DedupPolicy, Policies
from dedup_lib.settings.load import load_entity_policies
from dedup_lib.spark import spark_errors
from dedup_lib.telemetry.files import is_remote_session, output_path, spark_path
from dedup_lib.text import shown

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dedup_lib.telemetry.loaded import LoadedTelemetry
    from dedup_lib.telemetry.loader import PendingLoad

SIMULATE_EXAMPLES = """\
examples:
  dedup-lib simulate data/samples/day.parquet
  dedup-lib simulate data/samples/day-azure.csv.gz --window PT1M --partitioning
  dedup-lib simulate sends/ --map Id=message_id --map Timestamp=send_time --out verdicts.parquet
  dedup-lib simulate data/samples/day.parquet --entities data/samples/entities-arm.json
  dedup-lib simulate sends/ --content Body,Subject --no-diagnostics
  dedup-lib simulate traces.json.gz --format otlp --entity orders
"""


def _policies(args: argparse.Namespace) -> DedupPolicy | dict[str, DedupPolicy | None]:
    if args.entities:
        return load_entity_policies(args.entities)
    return window_policy(args.window, partitioning=args.partitioning, bounds=args.bounds)


def _load(
    spark: SparkSession,
    args: argparse.Namespace,
    mapping: dict[str, str],
    content: list[str] | None,
) -> PendingLoad:
    """The input, loaded once (its pending load), with ``content`` checked against its
    columns before any replay: a misspelt column costs no pass over the input."""
    from dedup_lib.telemetry.loader import load_once

    pending = load_once(spark, args.input, format=args.format, mapping=mapping, entity=args.entity)
    if args.diagnostics and content:
        from dedup_lib.analysis.diagnostics import check_content

        check_content(pending.valid.columns, content)
    return pending


def run(args: argparse.Namespace) -> int:
    from dedup_lib.replay.engine import detect_duplicates

    progress = Progress(args.quiet)
    existing_input(args.input, args)
    policy = _policies(args)
    content = content_columns(args.content)
    mapping = column_mapping(args.map)  # read before Spark starts, as every option
    if args.out:
        if os.path.exists(args.out) and not args.overwrite:
            raise CommandError(f"--out {args.out} exists; pass --overwrite to replace it")
        writable_target("--out", args.out)
    spark = start_spark(args)
    progress.step(f"loading {args.input}")
    pending = _load(spark, args, mapping, content)
    progress.step(
        f"replaying duplicate detection: {describe(policy)} (one pass over the input, which "
        "counts its rows too)"
    )
    result = detect_duplicates(pending.valid, policy, kernel=args.kernel)
    persisted = not args.out
    try:
        if args.out:
            out = output_path(spark, args.out)
            result.write.mode("overwrite").parquet(out)
            by = " (written by the cluster, on its file system)" if is_remote_session(spark) else ""
            progress.step(f"wrote verdicts to {out}{by}")
            result = spark.read.parquet(spark_path(out))
        else:
            result = result.persist()
            result.count()
    except spark_errors() as exc:
        failure = pending.failure(exc)
        if failure is None:
            raise
        raise failure from exc
    loaded = pending.loaded()
    counts = loaded.counts()
    progress.step(
        f"read {counts['read']:,} rows ({loaded.format}): {counts['valid']:,} valid, "
        f"{counts['quarantined']:,} quarantined"
        + (f", {counts['skipped']:,} not sends" if counts["skipped"] else "")
    )
    try:
        progress.step("counting the verdicts per entity")
        _report(loaded, pending.file_count, policy, result, progress)
        if args.diagnostics and (content or "payload_hash" in result.columns):
            _diagnose(result, content, progress)
        elif args.diagnostics:
            print()
            print("No content column (payload_hash), so missed resends and collisions are not")
            print("looked for; name the columns that say what a message carries with --content.")
    finally:
        if persisted:
            result.unpersist()
    progress.step("done")
    return 0


def _report(
    loaded: LoadedTelemetry,
    file_count: int,
    policy: Policies,
    result: DataFrame,
    progress: Progress,
) -> None:
    from dedup_lib.analysis.summaries import ground_truth_summary, has_ground_truth, summarize
    from dedup_lib.analysis.totals import ALL_ENTITIES

    counts = loaded.counts()
    print(
        f"{printable(loaded.path)}: {counts['read']:,} rows read, {counts['valid']:,} replayed, "
        f"{counts['quarantined']:,} quarantined. {describe(policy)}."
    )
    for note in loaded.notes:
        print_note(note)
    if file_count > 1 or loaded.ignored or counts["skipped"]:
        ignored = list(loaded.ignored.items())
        listed = ", ".join(f"{printable(name)} ({why})" for name, why in ignored[:5])
        more = f" and {len(ignored) - 5:,} more" if len(ignored) > 5 else ""
        print(
            f"Read {file_count:,} file(s)"
            + (f"; ignored, not telemetry: {listed}{more}" if ignored else "")
            + (f"; {_not_sends(loaded)}" if counts["skipped"] else "")
        )
    if counts["quarantined"]:
        listed = ", ".join(
            f"{printable(str(r.reason))}: {r.count:,}"
            for r in loaded.quarantine_reasons().itertuples()
        )
        print(f"Quarantined (not replayed): {listed}")
    print()
    print("Verdicts per entity")
    table = summarize(result)
    print(text_table(table))
    unchecked = table[(table["not_checked"] > 0) & (table["entity"] != ALL_ENTITIES)]
    if len(unchecked):
        print(
            f"Duplicates were not checked on {', '.join(map(shown, unchecked['entity']))}: "
            "detection is off "
            "there, so every send was accepted."
        )
    if has_ground_truth(result):
        progress.step("comparing with the ground truth, message by message")
        truth = ground_truth_summary(result)
        total = truth.iloc[-1]
        print()
        print("Against the ground truth (logical_id, attempt)")
        print(text_table(truth))
        print()
        print(
            f"Of {total.resends:,} true resends, {total.resends_caught:,} were caught and "
            f"{total.extra_deliveries:,} slipped through (reached consumers again); "
            f"{total.messages_lost:,} distinct messages were dropped without a trace."
        )


def _not_sends(loaded: LoadedTelemetry) -> str:
    """How many records were skipped as not sends, and why (the three most common reasons)."""
    reasons = loaded.not_send_reasons()
    listed = ", ".join(
        f"{printable(str(r.reason))}: {r.count:,}" for r in reasons.head(3).itertuples()
    )
    more = f" and {len(reasons) - 3} more reasons" if len(reasons) > 3 else ""
    count = loaded.counts()["skipped"]
    return f"{count:,} {loaded.format} record(s) skipped, not sends ({listed}{more})"


def _diagnose(result: DataFrame, content: list[str] | None, progress: Progress) -> None:
    from dedup_lib.analysis.diagnostics import (
        MISS_AFTER_WINDOW,
        collision_groups,
        collisions,
        missed_resends,
        missed_summary,
    )
    from dedup_lib.sweep.grid import configurable_window

    progress.step("looking for missed resends: the same content accepted twice")
    misses = missed_resends(result, content)
    print()
    print("Missed resends: the same content accepted again (reached consumers twice)")
    table = missed_summary(misses)
    print(text_table(table) if len(table) else "(none)")
    late = table[table["miss_cause"] == MISS_AFTER_WINDOW]
    if len(late):
        longest = late["longest_caught_from"].max()
        limit = WINDOW_BOUNDS["service"][1].total_seconds()
        if longest > limit:
            advice = " (beyond the service's 7-day limit)."
        else:
            window = configurable_window(longest)
            advice = f": configure {format_window(window, 'iso')} ({format_window(window)})."
        print(
            f"A window of {format_duration(longest, 'up')} or longer would catch every resend "
            f"that came after the window{advice}"
        )
    progress.step("looking for collisions: other content dropped as a duplicate")
    lost = collision_groups(collisions(result, content))
    print()
    print("Collisions: different content dropped as a duplicate (lost without a signal)")
    print(text_table(lost.head(20)) if len(lost) else "(none)")
    if len(lost) > 20:
        print(f"... and {len(lost) - 20} more groups")


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``simulate`` command and its options."""
    sim = commands.add_parser(
        "simulate",
        parents=[common],
        help="load telemetry, replay duplicate detection, print the summary",
        description="Load telemetry, replay duplicate detection with a window and partitioning "
        "mode, and print verdicts per entity; with ground truth columns (logical_id, attempt), "
        "also how many true resends were caught, slipped through, and which messages were lost.",
        epilog=SIMULATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _input_options(sim)
    _replay_options(sim)
    _output_options(sim)
    sim.set_defaults(run=run)


def _input_options(sim: argparse.ArgumentParser) -> None:
    """What to read, and how."""
    sim.add_argument("input", metavar="INPUT", help="a file or folder: Parquet, CSV, JSON Lines")
    sim.add_argument(
        "--format",
        choices=TELEMETRY_FORMATS,
        help="input format (default: from the file names, and for .json/.csv from the content: "
        "OpenTelemetry traces are recognised); otlp: the Collector's OTLP JSON Lines",
    )
    sim.add_argument(
        "--entity",
        type=entity_name,
        help="the queue or topic of rows whose file names none (it never replaces one given)",
    )
    add_column_mapping(
        sim,
        "--map",
        "rename a column, e.g. --map Id=message_id, or read a nested field, e.g. "
        "--map customDimensions.MessageId=message_id (repeatable)",
    )


def _replay_options(sim: argparse.ArgumentParser) -> None:
    """The entities' settings, and what walks the sends."""
    sim.add_argument(
        "--window",
        default="PT10M",
        help="duplicate detection window: ISO 8601 (PT10M), seconds (600), 10m, or 00:10:00 "
        "(default: PT10M, the service's default)",
    )
    sim.add_argument(
        "--partitioning",
        action="store_true",
        help="the entity is partitioned: the key is MessageId plus the partition key",
    )
    sim.add_argument(
        "--bounds",
        choices=("service", "emulator", "none"),
        default="service",
        help="window limits to enforce: service 20 s..7 days (default), emulator 5 s..5 min, none",
    )
    sim.add_argument(
        "--entities",
        action="append",
        default=[],
        metavar="FILE",
        help="the entities' real settings: an ARM template or Bicep-compiled JSON, 'az "
        "servicebus queue/topic show' output, or the emulator's Config.json (repeatable); "
        "each entity replays with its own window and mode, instead of --window/--partitioning",
    )
    sim.add_argument(
        "--kernel",
        choices=KERNELS,
        default="auto",
        help="what walks each key's sends: jvm (needs a JDK), python, or auto: the JVM one "
        "where it can be built, else the Python one (same verdicts; default: auto)",
    )


def _output_options(sim: argparse.ArgumentParser) -> None:
    """What to look for beyond the verdicts, and where to write them."""
    sim.add_argument(
        "--content",
        metavar="COL,COL,...",
        help="columns that say what a message carries, for missed resends and collisions "
        "(default: payload_hash when the telemetry has it)",
    )
    sim.add_argument(
        "--no-diagnostics",
        dest="diagnostics",
        action="store_false",
        help="skip looking for missed resends and collisions (saves two Spark passes)",
    )
    sim.add_argument(
        "--out",
        help="write every replayed row with its verdict here, as Parquet; on a remote Spark "
        "Connect server the cluster writes it (a relative path is made absolute here first)",
    )
    sim.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
