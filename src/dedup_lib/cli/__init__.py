"""``dedup-lib``: the headless jobs: ``simulate`` (load, detect, summarize, diagnose),
``generate``, ``postmortem``, and ``doctor`` (what this machine has for the workbench).

Errors are one line on stderr and a non-zero exit: 2 for a wrong command line, 1 for input the
job cannot use (any :class:`dedup_lib.errors.DedupLibError`). Anything else is a bug and shows
its traceback. Progress goes to stderr: a line per step, and Spark's stage progress.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from dedup_lib.cli import doctor, generate, postmortem, simulate
from dedup_lib.cli.common import PROG, common_options
from dedup_lib.errors import DedupLibError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession


def parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per module of this package."""
    top = argparse.ArgumentParser(
        prog=PROG,
        description="Replay Azure Service Bus duplicate detection over message telemetry. "
        "'dedup-lib COMMAND --help' documents each command's options.",
        epilog="examples:\n  dedup-lib simulate data/samples/day.parquet --window PT5M\n"
        "  dedup-lib generate /tmp/sends --rows 10000000\n  dedup-lib doctor",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_options()
    for command in (simulate, generate, postmortem, doctor):
        command.add_to(commands, common)
    return top


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run the command line; ``spark`` reuses a session (tests, notebooks) instead of
    starting one from ``--master``/``--remote``."""
    args = parser().parse_args(argv)
    args.spark = spark
    try:
        status: int = args.run(args)
    except DedupLibError as exc:
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
