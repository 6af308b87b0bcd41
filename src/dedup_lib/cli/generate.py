"""``dedup-lib generate``: synthetic telemetry with ground truth, written as a sample or a
folder of part files."""

from __future__ import annotations

import argparse
import dataclasses
import os

from dedup_lib.cli.options import (
    TELEMETRY_FORMATS,
    CommandError,
    entity_name,
    positive,
    rows,
    seed,
    share,
    writable_target,
)
from dedup_lib.cli.terminal import Progress, start_spark
from dedup_lib.errors import InputError, excerpt, printable
from dedup_lib.rules.policy import ACCEPTED, DedupPolicy
from dedup_lib.synth import SCENARIOS, SYNTH_COLUMNS
from dedup_lib.telemetry.schema import NAMING_STYLES

GENERATE_EXAMPLES = """\
examples:
  dedup-lib generate /tmp/day.parquet --rows 200000 --single-file
  dedup-lib generate /tmp/outage --scenario incident --rows 30000 --seed 7
  dedup-lib generate /tmp/big --rows 100000000 --partitions 64
  dedup-lib generate /tmp/traces.jsonl.gz --scenario incident --rows 30000 --format otlp
  dedup-lib generate /tmp/orders.json --scenario incident --rows 30000 --entity orders \\
      --kept-window PT1M --format sb-explorer
"""


def run(args: argparse.Namespace) -> int:
    from dedup_lib.replay.engine import detect_duplicates
    from dedup_lib.synth import generate_telemetry, plan_telemetry
    from dedup_lib.synth.exports import WRITERS
    from dedup_lib.telemetry.write import write_telemetry

    progress = Progress(args.quiet)
    wanted = _columns(args.columns)
    if os.path.exists(args.out) and not args.overwrite:
        raise CommandError(f"{args.out} exists; pass --overwrite to replace it")
    writable_target("OUT", args.out)
    kept = _kept_policy(args.kept_window, args.partitioning)
    scenario = SCENARIOS[args.scenario]()
    if args.malformed is not None:
        scenario = dataclasses.replace(scenario, malformed=args.malformed)
    if kept is not None:
        if args.malformed:
            raise CommandError("--malformed does not go with --kept-window: the broker keeps none")
        scenario = dataclasses.replace(scenario, malformed=0.0)
    plan = plan_telemetry(args.rows, args.seed, scenario)
    spark = start_spark(args)
    progress.step(
        f"generating about {args.rows:,} sends of scenario {args.scenario!r} "
        f"({plan.logical_messages:,} logical messages, seed {args.seed})"
    )
    df = generate_telemetry(
        spark, args.rows, seed=args.seed, scenario=scenario, partitions=args.partitions
    )
    if args.entity is not None:
        df = df.where(df["entity"] == args.entity)
    if kept is not None:
        progress.step(f"keeping what a broker with a {args.kept_window} window accepts")
        result = detect_duplicates(df, kept)
        df = result.where(result["verdict"] == ACCEPTED).select(*df.columns)
    if wanted:
        df = df.select(*wanted)
    order = tuple(c for c in ("send_time", "event_id") if c in df.columns)
    if args.format in WRITERS:
        WRITERS[args.format](df.orderBy(*order), args.out)
    else:
        write_telemetry(
            df,
            args.out,
            args.format,
            names=args.names,
            single_file=args.single_file,
            overwrite=args.overwrite,
            order_by=order if args.single_file else (),
        )
    progress.step(f"wrote {args.out}")
    print(printable(args.out))
    return 0


def _kept_policy(window: str | None, partitioning: bool) -> DedupPolicy | None:
    """The broker whose accepted sends ``--kept-window`` keeps, checked before Spark starts."""
    if window is None:
        if partitioning:
            raise CommandError("--partitioning goes with --kept-window")
        return None
    try:
        return DedupPolicy(window, partitioning=partitioning)  # type: ignore[arg-type]
    except (InputError, OverflowError) as exc:
        raise CommandError(f"--kept-window {excerpt(window)}: {exc}") from exc


def _columns(text: str | None) -> list[str] | None:
    """The ``--columns`` to keep, each one ``generate`` makes."""
    if text is None:
        return None
    wanted = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in SYNTH_COLUMNS]
    if unknown or not wanted:
        listed = f"unknown column(s) {', '.join(unknown)}" if unknown else "no column named"
        raise CommandError(f"--columns: {listed}; choose from {', '.join(SYNTH_COLUMNS)}")
    return wanted


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``generate`` command and its options."""
    gen = commands.add_parser(
        "generate",
        parents=[common],
        help="generate telemetry with ground truth",
        description="Generate message telemetry whose duplicates arise from lost "
        "acknowledgements, crashes and operator replays, with ground truth columns. The same "
        "seed gives the same rows on any number of cores.",
        epilog=GENERATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gen.add_argument(
        "out", metavar="OUT", help="where to write (a folder, or a file with --single-file)"
    )
    _send_options(gen)
    _file_options(gen)
    gen.set_defaults(run=run)


def _send_options(gen: argparse.ArgumentParser) -> None:
    """Which sends: how many, from what scenario, and which of them to keep."""
    gen.add_argument(
        "--rows", type=rows, default=200_000, help="about how many sends (default: 200000)"
    )
    gen.add_argument("--seed", type=seed, default=0, help="random seed, 0 or more (default: 0)")
    gen.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default="day",
        help="day: a day of a shop's senders (default); incident: an outage hour with repeated "
        "crashes",
    )
    gen.add_argument(
        "--malformed",
        type=share,
        help="share of sends with an unparseable send_time (default: the scenario's)",
    )
    gen.add_argument("--entity", type=entity_name, help="only this entity's sends")
    gen.add_argument(
        "--kept-window",
        metavar="WINDOW",
        help="only what a broker with this duplicate detection window keeps (its accepted "
        "sends), as an export of the entity shows them; e.g. PT10M",
    )
    gen.add_argument(
        "--partitioning",
        action="store_true",
        help="with --kept-window: the entity is partitioned",
    )


def _file_options(gen: argparse.ArgumentParser) -> None:
    """How they are written."""
    gen.add_argument(
        "--format",
        choices=TELEMETRY_FORMATS,
        default="parquet",
        help="default: parquet; otlp (traces), app-insights (the portal's CSV, or the query "
        "API's JSON by OUT's extension) and sb-explorer (a broker export) write one file",
    )
    gen.add_argument(
        "--names",
        choices=sorted(NAMING_STYLES),
        default="canonical",
        help="column names: canonical (default), azure (MessageId, EnqueuedTimeUtc, ...) or "
        "python (message_id, enqueued_time_utc, ...)",
    )
    gen.add_argument(
        "--columns",
        metavar="COL,COL,...",
        help="keep only these columns, canonical names, e.g. "
        "event_id,message_id,send_time,logical_id,attempt (default: all)",
    )
    gen.add_argument(
        "--partitions", type=positive, help="Spark partitions (default: Spark's parallelism)"
    )
    gen.add_argument(
        "--single-file",
        action="store_true",
        help="write one file named OUT, sorted by send time (for samples; local disk only)",
    )
    gen.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
