"""``dedup-lib watch``: the live monitor. Judges the sends that land in a folder as they land,
appends the verdicts to a Parquet folder, and prints a line per micro-batch."""

from __future__ import annotations

import argparse
import os
import re
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING

from dedup_lib.cli.failures import error_line
from dedup_lib.cli.journal import FORMATS, Journal
from dedup_lib.cli.options import (
    TELEMETRY_FORMATS,
    CommandError,
    add_column_mapping,
    column_mapping,
    content_columns,
    entity_name,
    window_policy,
    writable_target,
)
from dedup_lib.cli.terminal import describe, start_spark
from dedup_lib.errors import printable
from dedup_lib.memory import size_in_bytes
from dedup_lib.rules.durations import format_window, parse_window
from dedup_lib.rules.policy import Policies
from dedup_lib.settings.load import load_entity_policies

if TYPE_CHECKING:
    from dedup_lib.live.options import WatchOptions
    from dedup_lib.live.watch import Watch

WATCH_EXAMPLES = """\
examples:
  dedup-lib watch landing/ --out verdicts/ --checkpoint ck/ --once
  dedup-lib watch landing/ --window PT5M --lateness PT2M --out verdicts/ --checkpoint ck/ \\
      --alerts alerts.jsonl
  dedup-lib watch traces/ --format otlp --entities entities-arm.json --out v/ --checkpoint ck/
  dedup-lib watch landing/ --state executors --out verdicts/ --checkpoint ck/
  dedup-lib watch /var/lib/otelcol/servicebus --format otlp --out v/ --checkpoint ck/ \
      --alerts alerts.jsonl --metrics 127.0.0.1:9464
"""


def _lateness(text: str) -> str:
    try:
        parse_window(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("window: ")) from None
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds over 0, got {text!r}")
    return value


def _policy(args: argparse.Namespace) -> Policies:
    if args.entities:
        return load_entity_policies(args.entities)
    return window_policy(args.window, partitioning=args.partitioning, bounds=args.bounds)


def _check_folders(args: argparse.Namespace) -> None:
    """Every path checked before Spark starts: a folder to watch, places to write."""
    if not os.path.isdir(args.source):
        what = "a file" if os.path.exists(args.source) else "missing"
        raise CommandError(f"{args.source} is {what}: watch needs the folder files land in")
    for option in ("out", "checkpoint", "quarantine", "alerts"):
        path = getattr(args, option)
        if path is not None:
            writable_target(f"--{option}", path)
    for option in ("out", "checkpoint"):
        path = os.path.abspath(getattr(args, option))
        if path == os.path.abspath(args.source) or path.startswith(
            os.path.abspath(args.source).rstrip("/") + "/"
        ):
            raise CommandError(f"--{option} {args.source}: must not be inside the folder watched")


def run(args: argparse.Namespace) -> int:
    journal = Journal(args.log_format, args.quiet)
    try:
        return _watch(args, journal)
    except Exception as exc:
        # A service's journal keeps stderr: the failure whole, not only its line.
        journal.failed(error_line(args.command, exc), exc)
        return 1


def _watch(args: argparse.Namespace, journal: Journal) -> int:
    from dedup_lib.live.watch import watch_duplicates

    _check_folders(args)
    policy = _policy(args)
    content = content_columns(args.content)
    mapping = column_mapping(args.map)
    options = _options(args, content, mapping)
    options.check()
    spark = start_spark(args, ui=False, config=_server_settings(args))
    lateness = format_window(parse_window(args.lateness))
    journal.step(
        f"watching {printable(args.source)}: {describe(policy)}; judged once the watermark "
        f"(latest send time seen minus {lateness}) passes them"
    )
    watch = watch_duplicates(
        spark,
        args.source,
        policy,
        args.lateness,
        out=args.out,
        checkpoint=args.checkpoint,
        once=args.once,
        options=options,
        on_batch=journal.batch,
        on_note=journal.note,
    )
    if watch.metrics_address is not None:
        host, port = watch.metrics_address
        journal.step(f"metrics at http://{host}:{port}/metrics (and /-/healthy, /-/ready)")
    if watch.waiting:
        journal.step(
            f"nothing has landed in {printable(args.source)} yet: waiting for the first file "
            "(its format and columns)"
        )
    if not args.once:
        _run_until_stopped(watch, journal)
    loaded = watch.loaded
    journal.summary(
        f"{loaded['read']:,} rows loaded from {loaded['micro_batches']:,} micro-batch(es): "
        f"{loaded['quarantined']:,} quarantined"
        + (f", {loaded['skipped']:,} not sends" if loaded["skipped"] else "")
        + f"; verdicts in {printable(args.out)}"
    )
    # A micro-batch refused for the state's memory budget (said above): nothing more judged.
    return 1 if watch.refused else 0


def _options(
    args: argparse.Namespace, content: list[str] | None, mapping: dict[str, str]
) -> WatchOptions:
    """The monitor's options from the command line, by concern."""
    from dedup_lib.live.options import (
        JudgeOptions,
        ReadOptions,
        ServeOptions,
        StateOptions,
        WatchOptions,
        WriteOptions,
    )

    return WatchOptions(
        reading=ReadOptions(
            format=args.format,
            mapping=mapping,
            entity=args.entity,
            trigger=args.every,
            settle=args.settle,
            exclude=tuple(args.exclude),
        ),
        judging=JudgeOptions(content=content, resend_horizon=args.resend_horizon),
        writing=WriteOptions(quarantine=args.quarantine, alerts=args.alerts),
        serving=ServeOptions(metrics=args.metrics),
        state=StateOptions(mode=args.state, memory=args.state_memory),
    )


def _run_until_stopped(watch: Watch, journal: Journal) -> None:
    """Run until Ctrl-C or SIGTERM (as a service manager stops a service): the micro-batch in
    hand finishes, and the command exits 0. A failure of the monitor is raised."""
    asked = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        asked.set()

    before = signal.signal(signal.SIGTERM, stop)
    try:
        while watch.active and not asked.wait(0.5):
            pass
    except KeyboardInterrupt:
        asked.set()
    finally:
        signal.signal(signal.SIGTERM, before)
    if asked.is_set():
        journal.step("stopping (a restart with the same --checkpoint goes on from here)")
        watch.stop(timeout=3600)
    watch.wait()


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``watch`` command and its options."""
    cmd = commands.add_parser(
        "watch",
        parents=[common],
        help="judge sends as their telemetry lands in a folder (the live monitor)",
        description="Judge the sends whose telemetry lands in SOURCE, as it lands: each gets the "
        "verdict 'simulate' gives it once the watermark (the latest send time seen minus "
        "--lateness) passes it; a send that arrives later than that is 'late', never dropped.",
        epilog=WATCH_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmd.add_argument("source", metavar="SOURCE", help="the folder telemetry files land in")
    cmd.add_argument("--out", required=True, help="Parquet folder the verdicts are appended to")
    cmd.add_argument(
        "--checkpoint",
        required=True,
        help="folder of the monitor's progress and state: a restart with it resumes, once",
    )
    cmd.add_argument(
        "--state",
        choices=("driver", "executors"),
        default="driver",
        help="where the state is kept: the driver's memory, or Spark's state store on the "
        "executors, judged by a streaming query (a Spark Connect server needs the options "
        "dedup-lib connect-options prints) (default: driver)",
    )
    cmd.add_argument(
        "--state-memory",
        type=_size,
        metavar="SIZE",
        help="the most the driver's state may take in memory (4g, 512m): a micro-batch that "
        "could pass it is refused, naming --state executors (default: a quarter of the "
        "memory the process may use)",
    )
    _policy_options(cmd)
    _output_options(cmd)
    _input_options(cmd)
    cmd.set_defaults(run=run)


def _size(text: str) -> int:
    """A size in bytes: ``4g``, ``512m``, ``4GiB``, ``1048576``."""
    spelled = text.strip().lower().replace("ib", "")
    if not re.fullmatch(r"\d+(\.\d+)?[kmgt]?b?", spelled):
        raise argparse.ArgumentTypeError(f"expected a size such as 4g or 512m, got {text!r}")
    return size_in_bytes(spelled)


def _policy_options(cmd: argparse.ArgumentParser) -> None:
    """What the broker would do: the lateness judged within, the window, the entity's mode."""
    cmd.add_argument(
        "--lateness",
        type=_lateness,
        default="PT1M",
        help="how late a send's telemetry may land and still be judged (default: PT1M)",
    )
    cmd.add_argument("--window", default="PT10M", help="duplicate detection window (PT10M)")
    cmd.add_argument("--partitioning", action="store_true", help="the entity is partitioned")
    cmd.add_argument(
        "--bounds", choices=("service", "emulator", "none"), default="service", help="window limits"
    )
    cmd.add_argument(
        "--entities",
        action="append",
        default=[],
        metavar="FILE",
        help="the entities' real settings (ARM, az output, emulator Config.json; repeatable)",
    )


def _server_settings(args: argparse.Namespace) -> dict[str, str] | None:
    """A local Spark Connect server's settings for the state on the executors: its judge's
    plugin (:mod:`dedup_lib.live.executors.connect`), which a server takes when it starts."""
    remote = args.remote or os.environ.get("SPARK_REMOTE") or ""
    if args.state != "executors" or not remote or remote.startswith("sc://"):
        return None
    from dedup_lib.live.executors.connect import PLUGIN_CLASS, RELATIONS
    from dedup_lib.live.executors.processor import jar_path

    return {"spark.jars": str(jar_path()), RELATIONS: PLUGIN_CLASS}


def _output_options(cmd: argparse.ArgumentParser) -> None:
    """How long it runs and what it writes beside the verdicts."""
    cmd.add_argument("--once", action="store_true", help="judge the files present, then stop")
    cmd.add_argument(
        "--alerts", metavar="FILE", help="append collisions, resends and rejections (JSON)"
    )
    cmd.add_argument(
        "--resend-horizon",
        type=_lateness,
        default="PT1H",
        help="alert on the same content accepted again within this long (default: PT1H)",
    )
    cmd.add_argument(
        "--quarantine", help="Parquet folder of quarantined rows (default: OUT-quarantine)"
    )
    cmd.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464), "
        "with /-/healthy and /-/ready",
    )
    cmd.add_argument(
        "--log-format",
        choices=FORMATS,
        default="text",
        help="a line per event as text, or as a JSON object for journald or Loki (default: text)",
    )


def _input_options(cmd: argparse.ArgumentParser) -> None:
    """How the landing files are read, and how often."""
    cmd.add_argument(
        "--content", metavar="COL,COL,...", help="what a message carries (default: payload_hash)"
    )
    cmd.add_argument("--format", choices=TELEMETRY_FORMATS, help="input format (default: guessed)")
    cmd.add_argument("--entity", type=entity_name, help="the entity of rows that name none")
    add_column_mapping(cmd, "--map", "rename a column")
    cmd.add_argument(
        "--every", type=_seconds, default=5.0, metavar="SECONDS", help="micro-batch interval (5)"
    )
    cmd.add_argument(
        "--settle",
        type=_lateness,
        default="PT5S",
        help="how long a file must stay unchanged for a last line without a newline, or a "
        "compressed file, to count as finished (default: PT5S)",
    )
    cmd.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="names of files never read, such as a compressing Collector's active file "
        "(repeatable)",
    )
