"""``dedup-lib connect-options``: the options that give a Spark Connect server the live
monitor's judge (``watch --state executors`` on Connect), its jar built here with the JDK on
first use, printed for the server's start command: ``start-connect-server.sh --master
spark://HOST:7077 $(dedup-lib connect-options)``.
"""

from __future__ import annotations

import argparse
import shlex


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``connect-options`` command."""
    sub = commands.add_parser(
        "connect-options",
        help="print the options a Spark Connect server needs for watch --state executors",
        description="Print the options of start-connect-server.sh (or spark-submit) that give "
        "a Spark Connect server the live monitor's judge: its jar (built here with the JDK on "
        "first use, cached) on the server's class path and its executors', and its relation "
        "plugin. A Connect client cannot add a plugin: the server takes it when it starts, and "
        "refuses a client of another dedup-lib version. On another machine than the server's, "
        "copy the jar there (or give --jars a URL both reach).",
        epilog='example:\n  "$SPARK_HOME"/sbin/start-connect-server.sh --master '
        "spark://HOST:7077 $(dedup-lib connect-options)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Here, not above: `dedup-lib --help` loads no Spark.
    from dedup_lib.live.executors.connect import server_options
    from dedup_lib.live.executors.processor import jar_path

    print(shlex.join(server_options(str(jar_path()))))
    return 0
