"""``dedup-lib``: the headless jobs: ``simulate`` (load, detect, summarize, diagnose),
``generate`` and ``postmortem``.

Errors are one line on stderr and a non-zero exit: 2 for a wrong command line, 1 for input the
job cannot use. Progress goes to stderr: a line per step, and Spark's stage progress.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from typing import TYPE_CHECKING

import pandas as pd

from dedup_lib.analysis.diagnostics import (
    MISS_AFTER_WINDOW,
    collision_groups,
    collisions,
    missed_resends,
    missed_summary,
)
from dedup_lib.analysis.summaries import (
    ALL_ENTITIES,
    ground_truth_summary,
    has_ground_truth,
    summarize,
)
from dedup_lib.replay.engine import detect_duplicates
from dedup_lib.rules.durations import format_duration
from dedup_lib.rules.policy import WINDOW_BOUNDS, DedupPolicy, Policies
from dedup_lib.settings.load import load_entity_policies
from dedup_lib.spark import JavaNotFoundError, get_spark, is_connect
from dedup_lib.synth import (
    SCENARIOS,
    SYNTH_COLUMNS,
    generate_telemetry,
    plan_telemetry,
)
from dedup_lib.telemetry.read import load_telemetry
from dedup_lib.telemetry.write import NAMING_STYLES, write_telemetry

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from pyspark.sql import DataFrame, SparkSession

PROG = "dedup-lib"

SIMULATE_EXAMPLES = """\
examples:
  dedup-lib simulate data/samples/day.parquet
  dedup-lib simulate data/samples/day-azure.csv.gz --window PT1M --partitioning
  dedup-lib simulate sends/ --map Id=message_id --map Timestamp=send_time --out verdicts.parquet
  dedup-lib simulate data/samples/day.parquet --entities data/samples/entities-arm.json
  dedup-lib simulate sends/ --content Body,Subject --no-diagnostics
"""
GENERATE_EXAMPLES = """\
examples:
  dedup-lib generate /tmp/day.parquet --rows 200000 --single-file
  dedup-lib generate /tmp/outage --scenario incident --rows 30000 --seed 7
  dedup-lib generate /tmp/big --rows 100000000 --partitions 64
"""


class CommandError(Exception):
    """A problem the user can fix: reported as one line, exit status 1."""


class _Progress:
    """Step lines on stderr, with the seconds each took."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.started = time.perf_counter()

    def step(self, text: str) -> None:
        if not self.quiet:
            elapsed = time.perf_counter() - self.started
            print(f"[{elapsed:7.1f}s] {text}", file=sys.stderr, flush=True)


def _connect_progress(
    stages: Iterable[object] | None, inflight_tasks: int, operation_id: str | None, done: bool
) -> None:
    """Spark Connect progress: tasks done out of all known, on one line of stderr."""
    stages = list(stages or ())
    total = sum(int(getattr(s, "num_tasks", 0)) for s in stages)
    finished = sum(int(getattr(s, "num_completed_tasks", 0)) for s in stages)
    end = "\n" if done else ""
    print(f"\r  Spark: {finished}/{total} tasks", end=end, file=sys.stderr, flush=True)


def _spark(args: argparse.Namespace) -> SparkSession:
    if args.spark is not None:
        session: SparkSession = args.spark
        return session
    quiet = args.quiet
    config = {"spark.ui.showConsoleProgress": "false" if quiet else "true"}
    spark = get_spark(PROG, remote=args.remote, master=args.master, config=config)
    if is_connect(spark) and not quiet and sys.stderr.isatty():
        spark.registerProgressHandler(_connect_progress)  # type: ignore[arg-type]
    return spark


def _mapping(pairs: Sequence[str]) -> dict[str, str]:
    mapping = {}
    for pair in pairs:
        source, sep, target = pair.partition("=")
        if not sep or not source or not target:
            raise CommandError(f"--map {pair!r}: expected SOURCE=CANONICAL, e.g. Id=message_id")
        mapping[source] = target
    return mapping


def _table(df: pd.DataFrame) -> str:
    shown = df.copy()
    for name in shown.columns:
        if name.startswith("share"):
            shown[name] = shown[name].map(lambda v: "-" if pd.isna(v) else f"{v:.1%}")
        elif name.endswith(("delay", "caught_from")):
            shown[name] = shown[name].map(lambda v: format_duration(v, "up"))
        elif name in ("first", "last"):
            shown[name] = shown[name].map(lambda t: t.strftime("%Y-%m-%d %H:%M:%S"))
    return shown.to_string(index=False)


def _policies(args: argparse.Namespace) -> DedupPolicy | dict[str, DedupPolicy | None]:
    if args.entities:
        return load_entity_policies(*args.entities)
    try:
        return DedupPolicy(args.window, partitioning=args.partitioning, bounds=args.bounds)
    except ValueError as exc:
        raise CommandError(f"--window {args.window}: {exc}") from exc


def describe(policy: Policies) -> str:
    """One line for a policy, or for per-entity settings: each entity's window and mode."""
    if isinstance(policy, DedupPolicy):
        return policy.describe()
    each = [
        f"{name} {'detection off' if p is None else p.describe()}"
        for name, p in sorted(policy.items())
    ]
    return "per-entity settings: " + "; ".join(each)


def simulate(args: argparse.Namespace) -> int:
    progress = _Progress(args.quiet)
    policy = _policies(args)
    content = [c.strip() for c in args.content.split(",") if c.strip()] if args.content else None
    if args.out and os.path.exists(args.out) and not args.overwrite:
        raise CommandError(f"--out {args.out} exists; pass --overwrite to replace it")
    if "://" not in args.input and not os.path.exists(args.input):
        raise CommandError(f"{args.input} does not exist")
    spark = _spark(args)
    progress.step(f"loading {args.input}")
    loaded = load_telemetry(spark, args.input, format=args.format, mapping=_mapping(args.map))
    counts = loaded.counts()
    progress.step(
        f"read {counts['read']:,} rows ({loaded.format}): {counts['valid']:,} valid, "
        f"{counts['quarantined']:,} quarantined"
    )
    progress.step(f"replaying duplicate detection: {describe(policy)}")
    result = detect_duplicates(loaded.valid, policy)
    persisted = not args.out
    if args.out:
        result.write.mode("overwrite").parquet(args.out)
        progress.step(f"wrote verdicts to {args.out}")
        result = spark.read.parquet(args.out)
    else:
        result = result.persist()
    try:
        _report(args.input, counts, loaded.quarantine_reasons if counts["quarantined"] else None,
                policy, result)  # fmt: skip
        if args.diagnostics and (content or "payload_hash" in result.columns):
            progress.step("looking for missed resends and collisions by content")
            _diagnose(result, content)
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
    source: str,
    counts: dict[str, int],
    reasons: Callable[[], pd.DataFrame] | None,
    policy: Policies,
    result: DataFrame,
) -> None:
    print(
        f"{source}: {counts['read']:,} rows read, {counts['valid']:,} replayed, "
        f"{counts['quarantined']:,} quarantined. {describe(policy)}."
    )
    if reasons is not None:
        listed = ", ".join(f"{r.reason}: {r.count:,}" for r in reasons().itertuples())
        print(f"Quarantined (not replayed): {listed}")
    print()
    print("Verdicts per entity")
    table = summarize(result)
    print(_table(table))
    unchecked = table[(table["not_checked"] > 0) & (table["entity"] != ALL_ENTITIES)]
    if len(unchecked):
        print(
            f"Duplicates were not checked on {', '.join(unchecked['entity'])}: detection is off "
            "there, so every send was accepted."
        )
    if has_ground_truth(result):
        truth = ground_truth_summary(result)
        total = truth.iloc[-1]
        print()
        print("Against the ground truth (logical_id, attempt)")
        print(_table(truth))
        print()
        print(
            f"Of {total.resends:,} true resends, {total.resends_caught:,} were caught and "
            f"{total.extra_deliveries:,} slipped through (reached consumers again); "
            f"{total.messages_lost:,} distinct messages were dropped without a trace."
        )


def _diagnose(result: DataFrame, content: list[str] | None) -> None:
    misses = missed_resends(result, content)
    print()
    print("Missed resends: the same content accepted again (reached consumers twice)")
    table = missed_summary(misses)
    print(_table(table) if len(table) else "(none)")
    late = table[table["miss_cause"] == MISS_AFTER_WINDOW]
    if len(late):
        longest = late["longest_caught_from"].max()
        limit = WINDOW_BOUNDS["service"][1].total_seconds()
        beyond = " (beyond the service's 7-day limit)" if longest > limit else ""
        print(
            f"A window of {format_duration(longest, 'up')} or longer would catch every resend "
            f"that came after the window{beyond}."
        )
    lost = collision_groups(collisions(result, content))
    print()
    print("Collisions: different content dropped as a duplicate (lost without a signal)")
    print(_table(lost.head(20)) if len(lost) else "(none)")
    if len(lost) > 20:
        print(f"... and {len(lost) - 20} more groups")


def generate(args: argparse.Namespace) -> int:
    progress = _Progress(args.quiet)
    if os.path.exists(args.out) and not args.overwrite:
        raise CommandError(f"{args.out} exists; pass --overwrite to replace it")
    scenario = SCENARIOS[args.scenario]()
    if args.malformed is not None:
        scenario = dataclasses.replace(scenario, malformed=args.malformed)
    plan = plan_telemetry(args.rows, args.seed, scenario)
    spark = _spark(args)
    progress.step(
        f"generating about {args.rows:,} sends of scenario {args.scenario!r} "
        f"({plan.logical_messages:,} logical messages, seed {args.seed})"
    )
    df = generate_telemetry(
        spark, args.rows, seed=args.seed, scenario=scenario, partitions=args.partitions
    )
    if args.columns:
        wanted = [c.strip() for c in args.columns.split(",") if c.strip()]
        unknown = [c for c in wanted if c not in SYNTH_COLUMNS]
        if unknown:
            raise CommandError(
                f"--columns: unknown column(s) {', '.join(unknown)}; "
                f"choose from {', '.join(SYNTH_COLUMNS)}"
            )
        df = df.select(*wanted)
    order = (
        tuple(c for c in ("send_time", "event_id") if c in df.columns) if args.single_file else ()
    )
    write_telemetry(
        df,
        args.out,
        args.format,
        names=args.names,
        single_file=args.single_file,
        overwrite=args.overwrite,
        order_by=order,
    )
    progress.step(f"wrote {args.out}")
    print(args.out)
    return 0


def postmortem(args: argparse.Namespace) -> int:
    from dedup_lib.workbench.report import run_postmortem

    progress = _Progress(args.quiet)
    try:
        DedupPolicy(args.window, partitioning=args.partitioning)
    except ValueError as exc:
        raise CommandError(f"--window {args.window}: {exc}") from exc
    if not os.path.exists(args.input):
        raise CommandError(f"{args.input} does not exist")
    progress.step(f"running the postmortem notebook on {args.input} ({args.window})")
    report = run_postmortem(
        args.input,
        window=args.window,
        partitioning=args.partitioning,
        entity=args.entity,
        start=args.start,
        end=args.end,
        out_dir=args.out_dir,
    )
    progress.step("done")
    print(report)
    return 0


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a share between 0 and 1, got {text!r}"
        ) from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    spark_opts = common.add_argument_group("Spark")
    spark_opts.add_argument(
        "--master",
        help="classic local master, e.g. local[4] (default: local[*], or $DEDUP_SPARK_MASTER)",
    )
    spark_opts.add_argument(
        "--remote",
        help="Spark Connect: sc://host:15002, or local[2] for a local server "
        "(default: $SPARK_REMOTE when set)",
    )
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    top = argparse.ArgumentParser(
        prog=PROG,
        description="Replay Azure Service Bus duplicate detection over message telemetry. "
        "'dedup-lib COMMAND --help' documents each command's options.",
        epilog="examples:\n  dedup-lib simulate data/samples/day.parquet --window PT5M\n"
        "  dedup-lib generate /tmp/sends --rows 10000000",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

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
    sim.add_argument("input", metavar="INPUT", help="a file or folder: Parquet, CSV, JSON Lines")
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
        "--format", choices=("parquet", "csv", "json"), help="input format (default: from names)"
    )
    sim.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="SOURCE=CANONICAL",
        help="rename a column, e.g. --map Id=message_id (repeatable)",
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
    sim.add_argument("--out", help="write every replayed row with its verdict here, as Parquet")
    sim.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    sim.set_defaults(run=simulate)

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
    gen.add_argument(
        "--rows", type=_positive, default=200_000, help="about how many sends (default: 200000)"
    )
    gen.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    gen.add_argument(
        "--scenario",
        choices=sorted(SCENARIOS),
        default="day",
        help="day: a day of a shop's senders (default); incident: an outage hour with repeated "
        "crashes",
    )
    gen.add_argument(
        "--format", choices=("parquet", "csv", "json"), default="parquet", help="default: parquet"
    )
    gen.add_argument(
        "--names",
        choices=sorted(NAMING_STYLES),
        default="canonical",
        help="column names: canonical (default), azure (MessageId, EnqueuedTimeUtc, ...) or "
        "python (message_id, enqueued_time_utc, ...)",
    )
    gen.add_argument(
        "--malformed",
        type=_share,
        help="share of sends with an unparseable send_time (default: the scenario's)",
    )
    gen.add_argument(
        "--columns",
        metavar="COL,COL,...",
        help="keep only these columns, canonical names, e.g. "
        "event_id,message_id,send_time,logical_id,attempt (default: all)",
    )
    gen.add_argument(
        "--partitions", type=_positive, help="Spark partitions (default: Spark's parallelism)"
    )
    gen.add_argument(
        "--single-file",
        action="store_true",
        help="write one file named OUT, sorted by send time (for samples; local disk only)",
    )
    gen.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    gen.set_defaults(run=generate)

    post = commands.add_parser(
        "postmortem",
        parents=[common],
        help="run the incident postmortem notebook headless, write an HTML report",
        description="Run notebooks/04_incident_postmortem.ipynb with papermill on INPUT and "
        "write a self-contained HTML report (charts work offline) to --out-dir.",
        epilog="examples:\n  dedup-lib postmortem data/samples/incident.parquet --window PT1M\n"
        "  dedup-lib postmortem sends/ --entity orders --start 2026-11-03T21:00 "
        "--end 2026-11-03T22:00",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    post.add_argument("input", metavar="INPUT", help="the incident's telemetry, file or folder")
    post.add_argument("--window", default="PT10M", help="the entity's window (default: PT10M)")
    post.add_argument("--partitioning", action="store_true", help="the entity is partitioned")
    post.add_argument("--entity", default="(all)", help="one queue or topic (default: all)")
    post.add_argument("--start", help="start of the incident, ISO 8601 UTC (default: first send)")
    post.add_argument("--end", help="end of the incident, ISO 8601 UTC (default: last send)")
    post.add_argument("--out-dir", default="reports", help="where to write (default: reports)")
    post.set_defaults(run=postmortem)
    return top


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run the command line; ``spark`` reuses a session (tests, notebooks) instead of
    starting one from ``--master``/``--remote``."""
    args = parser().parse_args(argv)
    args.spark = spark
    try:
        status: int = args.run(args)
    except (CommandError, JavaNotFoundError, ValueError, TypeError, FileNotFoundError,
            FileExistsError) as exc:  # fmt: skip
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
