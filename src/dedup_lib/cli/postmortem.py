"""``dedup-lib postmortem``: the incident postmortem notebook run headless, as one HTML file."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from dedup_lib.analysis import ALL_ENTITIES
from dedup_lib.cli.options import (
    TELEMETRY_FORMATS,
    CommandError,
    add_column_mapping,
    column_mapping,
    content_columns,
    entity_name,
    existing_input,
    iso_time,
    kept_options_hint,
    time_range,
    window_policy,
    writable_target,
)
from dedup_lib.cli.terminal import Progress
from dedup_lib.errors import InputError, printable

if TYPE_CHECKING:
    from dedup_lib.workbench.report import PostmortemOptions


def run(args: argparse.Namespace) -> int:
    from dedup_lib.workbench.report import KeptExport, PostmortemOptions

    progress = Progress(args.quiet)
    existing_input(args.input, args)
    window_policy(args.window, partitioning=args.partitioning)
    time_range(args.start, args.end)
    content = content_columns(args.content)
    mapping = column_mapping(args.map) or None
    kept = None
    if args.kept is None and (args.kept_map or args.kept_format):
        raise CommandError("--kept-map and --kept-format describe the export --kept names")
    if args.kept is not None:
        existing_input(args.kept, args)
        kept = KeptExport(args.kept, args.kept_format, column_mapping(args.kept_map) or None)
    writable_target("--out-dir", os.path.join(args.out_dir, "report.html"))
    progress.step(f"running the postmortem notebook on {args.input} ({args.window})")
    try:
        report = _run(args, PostmortemOptions(args.format, mapping, content, kept))
    except InputError as exc:
        # the notebook loads KEPT as it loads INPUT: an error of KEPT's names its options
        about_kept = kept is not None and str(Path(kept.path).resolve()) in str(exc)
        if not (about_kept and (hint := kept_options_hint(exc))):
            raise
        raise InputError(f"{exc} {hint}") from exc
    progress.step("done")
    print(printable(str(report)))
    return 0


def _run(args: argparse.Namespace, options: PostmortemOptions) -> Path:
    from dedup_lib.workbench.report import run_postmortem

    return run_postmortem(
        args.input,
        window=args.window,
        partitioning=args.partitioning,
        entity=args.entity,
        start=args.start,
        end=args.end,
        out_dir=args.out_dir,
        options=options,
    )


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``postmortem`` command and its options."""
    post = commands.add_parser(
        "postmortem",
        parents=[common],
        help="run the incident postmortem notebook headless, write an HTML report",
        description="Run notebooks/04_incident_postmortem.ipynb with papermill on INPUT and "
        "write a self-contained HTML report (charts work offline) to --out-dir.",
        epilog="examples:\n  dedup-lib postmortem data/samples/incident.parquet --window PT1M\n"
        "  dedup-lib postmortem sends/ --entity orders --start 2026-11-03T21:00 "
        "--end 2026-11-03T22:00\n"
        "  dedup-lib postmortem data/samples/incident.parquet --entity orders "
        "--kept data/samples/incident-kept/orders.json.gz",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    post.add_argument("input", metavar="INPUT", help="the incident's telemetry, file or folder")
    post.add_argument("--window", default="PT10M", help="the entity's window (default: PT10M)")
    post.add_argument("--partitioning", action="store_true", help="the entity is partitioned")
    post.add_argument(
        "--entity", type=entity_name, default=ALL_ENTITIES, help="one queue or topic (default: all)"
    )
    post.add_argument(
        "--start", type=iso_time, help="start of the incident, ISO 8601 UTC (default: first send)"
    )
    post.add_argument(
        "--end", type=iso_time, help="end of the incident, ISO 8601 UTC (default: last send)"
    )
    post.add_argument(
        "--kept",
        metavar="EXPORT",
        help="what the broker kept (a Service Bus Explorer export): the report checks the "
        "replay against it",
    )
    post.add_argument(
        "--kept-format",
        choices=TELEMETRY_FORMATS,
        help="the export's format (default: recognised from its content)",
    )
    post.add_argument(
        "--format",
        choices=TELEMETRY_FORMATS,
        help="the input's format (default: from the file names and content)",
    )
    add_column_mapping(post, "--map", "rename a column, e.g. --map Id=message_id (repeatable)")
    add_column_mapping(
        post, "--kept-map", "rename a column of the export, e.g. --kept-map Enqueued=send_time"
    )
    post.add_argument(
        "--content",
        metavar="COL,COL,...",
        help="columns that say what a message carries, for the resends that reached consumers "
        "again and the messages lost (default: payload_hash when the telemetry has it)",
    )
    post.add_argument("--out-dir", default="reports", help="where to write (default: reports)")
    post.set_defaults(run=run)
