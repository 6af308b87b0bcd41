"""``dedup-lib``: the headless jobs: ``simulate`` (load, detect, summarize, diagnose), ``watch``
(the live monitor), ``generate``, ``postmortem``, ``reconcile`` (a replay against what the
broker kept), ``explore`` (the window explorer as a web page, served by Voilà), ``rules`` (the
monitor's alerting rules for a scrape job and runbooks), ``notebooks`` (the workbench's
notebooks into a folder), ``connect-options`` (:mod:`~dedup_lib.cli.connect_options`: what a
Spark Connect server needs for the monitor's state on the executors) and ``doctor`` (what this
machine has for the workbench), one module each. Beside them: :mod:`~dedup_lib.cli.options` (the
options, checked before Spark starts), :mod:`~dedup_lib.cli.terminal` (what the commands print,
and the Spark session they run on), :mod:`~dedup_lib.cli.failures` (the one line an error
becomes) and :mod:`~dedup_lib.cli.journal` (what ``watch`` prints as it runs, as text or JSON
lines, and every command's warnings).

Errors are one line on stderr, escaped, and a non-zero exit: 2 for a wrong command line
(argparse's usage line), 1 for anything else: input the job cannot use (any
:class:`dedup_lib.errors.DedupLibError`), a Spark error (its first line and where Spark's log
is), or a bug ("internal error", its traceback in that log). Every option is checked before
Spark starts. Progress goes to stderr: a line per step, and Spark's stage progress; so do
the library's warnings (:class:`dedup_lib.errors.DedupLibWarning`), a line each.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import warnings
from typing import TYPE_CHECKING, Any

from dedup_lib.cli import (
    connect_options,
    doctor,
    explore,
    generate,
    notebooks,
    postmortem,
    reconcile,
    rules,
    simulate,
    watch,
)
from dedup_lib.cli.failures import error_line
from dedup_lib.cli.journal import Journal
from dedup_lib.cli.options import PROG, common_options
from dedup_lib.errors import DedupLibWarning
from dedup_lib.spark import log_handler, spark_log_path

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

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
    for command in (simulate, watch, generate, postmortem, reconcile, explore, notebooks, doctor):
        command.add_to(commands, common)
    rules.add_to(commands, common)
    connect_options.add_to(commands, common)
    return top


def main(argv: Sequence[str] | None = None, *, spark: SparkSession | None = None) -> int:
    """Run the command line; ``spark`` reuses a session (tests, notebooks) instead of
    starting one from ``--master``/``--remote``."""
    args = parser().parse_args(argv)
    args.spark = spark
    journal = Journal(getattr(args, "log_format", "text"), quiet=False)
    try:
        with _warnings_routed(args.command, journal):
            status: int = args.run(args)
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        print(error_line(args.command, exc), file=sys.stderr)
        return 1
    return status


@contextlib.contextmanager
def _warnings_routed(command: str, journal: Journal) -> Iterator[None]:
    """The library's own warnings (:class:`~dedup_lib.errors.DedupLibWarning`) printed by
    ``journal`` on stderr, for the journal of a service; other libraries' (pyspark's,
    pandas') in Spark's log: on the terminal they would be lines of library internals around
    the command's answer."""
    with contextlib.suppress(OSError):
        spark_log_path().parent.mkdir(parents=True, exist_ok=True)
    handler = log_handler()
    logger = logging.getLogger("py.warnings")
    logger.addHandler(handler)
    logging.captureWarnings(True)
    logged = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *where: Any, **more: Any) -> None:
        if issubclass(category, DedupLibWarning):
            journal.warning(f"{PROG} {command}: warning: {message}")
        else:
            logged(message, category, *where, **more)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = logged
        logging.captureWarnings(False)
        logger.removeHandler(handler)
        handler.close()


if __name__ == "__main__":
    sys.exit(main())
