"""``dedup-lib reconcile``: replay the telemetry, then check the verdicts against an export of
what the broker kept, and print the categories and what they say about the entity's window."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dedup_lib.analysis import ALL_ENTITIES
from dedup_lib.cli.options import (
    TELEMETRY_FORMATS,
    CommandError,
    add_column_mapping,
    column_mapping,
    entity_name,
    existing_input,
    iso_time,
    kept_options_hint,
    time_range,
    window_policy,
)
from dedup_lib.cli.terminal import Progress, start_spark, text_table
from dedup_lib.errors import InputError, excerpt, printable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dedup_lib.analysis.reconcile import Name
    from dedup_lib.telemetry.loaded import LoadedTelemetry

RECONCILE_EXAMPLES = """\
examples:
  dedup-lib reconcile sends.parquet kept.jsonl --window PT10M --entity orders
  dedup-lib reconcile sends.csv kept.csv --map Id=message_id --kept-map Enqueued=send_time
  dedup-lib reconcile sends/ orders-export.json --kept-format sb-explorer --entity orders \\
      --start 2026-11-03T21:00 --end 2026-11-03T22:00 --tolerance PT1M
"""
#: Rows of contradictions and pairs printed after the summary.
SHOWN = 10


def run(args: argparse.Namespace) -> int:
    from dedup_lib.analysis.reconcile import parse_tolerance, reconcile
    from dedup_lib.replay.engine import detect_duplicates

    progress = Progress(args.quiet)
    existing_input(args.telemetry, args)
    existing_input(args.kept, args)
    mapping, kept_mapping = column_mapping(args.map), column_mapping(args.kept_map)
    policy = window_policy(args.window, partitioning=args.partitioning)
    try:
        tolerance = parse_tolerance(args.tolerance)
    except InputError as exc:
        raise CommandError(f"--tolerance {excerpt(args.tolerance)}: {exc}") from exc
    time_range(args.start, args.end)
    spark = start_spark(args)
    telemetry, kept = _load(spark, args, progress, mapping, kept_mapping)
    if args.entity == ALL_ENTITIES:
        _entity_named(telemetry, kept)
    progress.step(f"replaying duplicate detection: {policy.describe()}")
    result = detect_duplicates(telemetry.valid, policy).persist()
    try:
        progress.step("matching the kept messages to the sends")
        found = reconcile(
            result,
            kept.valid,
            policy,
            entity=args.entity,
            start=args.start,
            end=args.end,
            tolerance=tolerance,
        )
        print(_loaded("Telemetry", telemetry) + f" Replayed with {policy.describe()}.")
        print(_loaded("Kept", kept) + f" Matched within {args.tolerance}.")
        print()
        summary = found.summary()
        print(text_table(summary[["category", "count"]]))
        for category, count, means, todo in summary.itertuples(index=False):
            if count and todo not in ("—", "nothing: the replay agrees"):
                print(f"\n{category}: {means}.\n  What to do: {todo}.")
        print()
        print(printable(found.verdict()))
        listed: tuple[tuple[Name, str], ...] = (
            ("contradictions", "Contradictions: kept messages the replay drops"),
            ("pairs", "Pairs: two kept messages of one key inside the window"),
        )
        for name, title in listed:
            count = found.counts()[name]
            if count:
                columns = _shown(name)
                print()
                print(f"{title} (first {min(count, SHOWN)} of {count:,})")
                table = found.table(name, SHOWN)
                print(text_table(table[[c for c in columns if c in table.columns]]))
    finally:
        result.unpersist()
    progress.step("done")
    return 0


def _load(
    spark: SparkSession,
    args: argparse.Namespace,
    progress: Progress,
    mapping: dict[str, str],
    kept_mapping: dict[str, str],
) -> tuple[LoadedTelemetry, LoadedTelemetry]:
    """TELEMETRY and KEPT, loaded; an error of KEPT's that hints at ``--map`` or ``--format``
    (TELEMETRY's options here) names ``--kept-map`` or ``--kept-format``."""
    from dedup_lib.telemetry.loader import load_telemetry

    progress.step(f"loading {args.telemetry}")
    telemetry = load_telemetry(spark, args.telemetry, format=args.format, mapping=mapping)
    progress.step(f"loading {args.kept}")
    try:
        kept = load_telemetry(spark, args.kept, format=args.kept_format, mapping=kept_mapping)
    except InputError as exc:
        if not (hint := kept_options_hint(exc)):
            raise
        raise InputError(f"{exc} {hint}") from exc
    return telemetry, kept


def _entity_named(telemetry: LoadedTelemetry, kept: LoadedTelemetry) -> None:
    """Both name their entities, or neither does: else ``--entity`` must say which one."""
    lacking = [
        name
        for name, loaded, other in (("TELEMETRY", telemetry, kept), ("KEPT", kept, telemetry))
        if "entity" not in loaded.valid.columns and "entity" in other.valid.columns
    ]
    if lacking:
        raise CommandError(
            f"{lacking[0]} has no entity column (an export does not name its entity): pass "
            "--entity NAME, the queue or topic it belongs to"
        )


def _shown(name: str) -> list[str]:
    if name == "pairs":
        return ["entity", "message_id", "first_send_time", "send_time", "gap_s"]
    return ["entity", "message_id", "send_time", "replay_verdict", "gap_s", "original_kept"]


def _loaded(what: str, loaded: LoadedTelemetry) -> str:
    counts = loaded.counts()
    return (
        f"{what} {printable(loaded.path)}: {counts['read']:,} rows read, {counts['valid']:,} "
        f"used, {counts['quarantined']:,} quarantined."
    )


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``reconcile`` command and its options."""
    rec = commands.add_parser(
        "reconcile",
        parents=[common],
        help="check a replay against an export of what the broker kept",
        description="Replay duplicate detection over TELEMETRY, then match each message the "
        "broker kept (KEPT: an export of the entity, e.g. from Service Bus Explorer) to the "
        "send it came from: explained, contradicted (the replay drops it), or unexplained (the "
        "telemetry lacks its send); also pairs of kept messages of one key inside the window, "
        "and accepted sends the export lacks. Says which windows agree with the broker.",
        epilog=RECONCILE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rec.add_argument("telemetry", metavar="TELEMETRY", help="the sends: a file or folder")
    rec.add_argument(
        "kept", metavar="KEPT", help="what the broker kept: message_id and send_time (enqueued)"
    )
    rec.add_argument("--window", default="PT10M", help="the replay's window (default: PT10M)")
    rec.add_argument(
        "--partitioning",
        action="store_true",
        help="the entity is partitioned: the key is MessageId plus the partition key",
    )
    rec.add_argument(
        "--entity",
        type=entity_name,
        default=ALL_ENTITIES,
        help="one queue or topic; names the entity of KEPT when it has no entity column "
        "(default: all, matched by their entity columns)",
    )
    rec.add_argument("--start", type=iso_time, help="report from here, ISO 8601 UTC")
    rec.add_argument("--end", type=iso_time, help="report up to here, ISO 8601 UTC")
    rec.add_argument(
        "--tolerance",
        default="PT30S",
        help="how far a kept enqueue time may lie from its send's time (clocks differ); "
        "default: PT30S",
    )
    rec.add_argument(
        "--format",
        choices=TELEMETRY_FORMATS,
        help="format of TELEMETRY (default: from the file names and content)",
    )
    add_column_mapping(
        rec, "--map", "rename a column of TELEMETRY, e.g. --map Id=message_id (repeatable)"
    )
    add_column_mapping(
        rec,
        "--kept-map",
        "rename a column of KEPT, e.g. --kept-map Enqueued=send_time (repeatable)",
    )
    rec.add_argument(
        "--kept-format",
        choices=TELEMETRY_FORMATS,
        help="format of KEPT (default: from the file names and content)",
    )
    rec.set_defaults(run=run)
