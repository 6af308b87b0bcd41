"""The command line's options, checked before Spark starts: each option's type (a time, an
entity name, a share, a URL), the inputs and outputs it names, and the options every
command that runs Spark takes. A wrong value is a :class:`CommandError`: one line."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
from typing import TYPE_CHECKING

from dedup_lib.errors import DedupLibError, InputError, excerpt, printable
from dedup_lib.rules.policy import Bounds, DedupPolicy
from dedup_lib.spark.session import ui_address
from dedup_lib.telemetry.files import has_scheme, is_remote_session, local_path
from dedup_lib.telemetry.schema import FORMATS, RECORD_FORMAT_NAMES

if TYPE_CHECKING:
    from collections.abc import Sequence


PROG = "dedup-lib"


#: Every format the loader reads and the generator writes: the choices of each ``--format``.
TELEMETRY_FORMATS: tuple[str, ...] = (*FORMATS, *RECORD_FORMAT_NAMES)


#: The most rows ``generate`` is asked for: beyond, a typo (an extra zero or three) would run
#: for days.
MAX_ROWS = 10**12


class CommandError(DedupLibError):
    """A problem with the command line the user can fix: reported as one line, exit status 1."""


def column_mapping(pairs: Sequence[str]) -> dict[str, str]:
    """``--map`` pairs as the loader's mapping; split at the last ``=``, as a canonical name
    holds none and a source column may."""
    mapping = {}
    for pair in pairs:
        source, sep, target = pair.rpartition("=")
        if not sep or not source or not target:
            raise CommandError(
                f"--map {excerpt(pair)}: expected SOURCE=CANONICAL, e.g. Id=message_id"
            )
        mapping[source] = target
    return mapping


def add_column_mapping(parser: argparse.ArgumentParser, flag: str, text: str) -> None:
    """A repeatable ``SOURCE=CANONICAL`` option (``flag``, described by ``text``), read by
    :func:`column_mapping` before Spark starts."""
    parser.add_argument(flag, action="append", default=[], metavar="SOURCE=CANONICAL", help=text)


#: The loader's hints at an option of the telemetry's, what it does, and the option that
#: does it for KEPT, the export of what the broker kept (``reconcile``, ``postmortem``).
KEPT_OPTIONS = (
    ("--map ", "columns are mapped", "--kept-map"),
    ("--format ", "format is named", "--kept-format"),
)


def kept_options_hint(error: InputError) -> str:
    """What to add to ``error``, of loading KEPT, where its hint names the telemetry's options
    (``--map``, ``--format``): KEPT's own; empty where it names neither."""
    said = [
        f"KEPT's {what} with {option}" for hint, what, option in KEPT_OPTIONS if hint in str(error)
    ]
    return f"({'; '.join(said)})" if said else ""


def iso_time(text: str) -> str:
    """An ISO 8601 time for ``--start``/``--end``, checked and passed on as written."""
    import pandas as pd

    try:
        pd.Timestamp(dt.datetime.fromisoformat(text.strip()))
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-11-03T21:00, got {excerpt(text)}"
        ) from None
    return text.strip()


def time_range(start: str | None, end: str | None) -> None:
    """``--end`` after ``--start``, both read as UTC when they name no offset."""
    if start is None or end is None:
        return
    import pandas as pd

    first, last = (pd.Timestamp(t) for t in (start, end))
    first, last = (t.tz_localize("UTC") if t.tzinfo is None else t for t in (first, last))
    if last <= first:
        raise CommandError(f"--end {end} is not after --start {start}")


def entity_name(text: str) -> str:
    """A queue or topic name for ``--entity``: not empty, printable, at most 260 characters
    (the service's limit)."""
    if not text.strip() or printable(text) != text or len(text) > 260:
        raise argparse.ArgumentTypeError(
            f"expected a queue or topic name (printable, 1 to 260 characters), got {excerpt(text)}"
        )
    return text


def remote_cluster(args: argparse.Namespace) -> bool:
    """True when the command runs on a remote Spark Connect server (``--remote`` or
    ``SPARK_REMOTE`` is ``sc://...``, or the session given is one), which resolves paths."""
    spark = getattr(args, "spark", None)
    if spark is not None:
        return is_remote_session(spark)
    url = getattr(args, "remote", None) or os.environ.get("SPARK_REMOTE") or ""
    return url.startswith("sc://")


def existing_input(path: str, args: argparse.Namespace | None = None) -> None:
    """The input exists, when it is a local path or ``file:`` URI (a URL is Spark's to
    check): the loader's own test (:func:`dedup_lib.telemetry.files.local_path`), before
    Spark starts. On a remote cluster (``args``) a path this machine lacks is the cluster's
    to resolve, and the loader's error says when it does not find it either."""
    local = local_path(path)
    if local is not None and not os.path.exists(local):
        if args is not None and remote_cluster(args):
            return
        raise CommandError(f"{path} does not exist")


def writable_target(option: str, path: str) -> None:
    """``path`` can be written: its nearest existing folder is a folder we may write in (Spark
    creates the missing ones). A URL is Spark's to check."""
    if has_scheme(path):
        return
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise CommandError(f"{option} {path}: {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CommandError(f"{option} {path}: cannot write in {parent}")


def content_columns(text: str | None) -> list[str] | None:
    """The ``--content`` columns, at least one when the option is given."""
    if text is None:
        return None
    columns = [c.strip() for c in text.split(",") if c.strip()]
    if not columns:
        raise CommandError(f"--content {text!r}: name at least one column, e.g. Body,Subject")
    return columns


def _whole(text: str, least: int) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {excerpt(text)}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected at least {least}, got {value}")
    return value


def seed(text: str) -> int:
    """A random seed for ``--seed``: a whole number, 0 or more."""
    return _whole(text, 0)


def rows(text: str) -> int:
    """How many rows ``generate`` writes: 1 to :data:`MAX_ROWS`."""
    value = positive(text)
    if value > MAX_ROWS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_ROWS:,}, got {value:,}")
    return value


def remote_url(text: str) -> str:
    """A Spark Connect URL for ``--remote``: ``sc://host[:port]`` or ``local[N]``."""
    if not re.fullmatch(r"sc://[^\s/]+(/.*)?|local(\[(\d+|\*)\])?", text):
        raise argparse.ArgumentTypeError(
            f"expected sc://host:15002 or local[2], got {excerpt(text)}"
        )
    return text


def spark_ui(text: str) -> str:
    """Where Spark's UI listens, for ``--spark-ui``: ``HOST:PORT`` (``[::1]:4040`` for IPv6),
    or ``off``."""
    if text.strip().lower() == "off":
        return "off"
    try:
        _, port = ui_address(text)
    except ValueError:
        port = None
    if port is None:
        raise argparse.ArgumentTypeError(
            f"expected HOST:PORT such as 127.0.0.1:4040, or off, got {excerpt(text)}"
        )
    return text.strip()


def host_name(text: str) -> str:
    """A host name or IP address for ``--driver-host``."""
    if not re.fullmatch(r"[\w.-]+|\[?[0-9A-Fa-f:.]+\]?", text.strip()):
        raise argparse.ArgumentTypeError(
            f"expected a host name or IP address such as 10.0.0.5, got {excerpt(text)}"
        )
    return text.strip()


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a share between 0 and 1, got {excerpt(text)}"
        ) from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), got {text}")
    return value


def positive(text: str) -> int:
    """A count: a whole number, 1 or more."""
    return _whole(text, 1)


def common_options() -> argparse.ArgumentParser:
    """The options every command that runs Spark takes."""
    common = argparse.ArgumentParser(add_help=False)
    spark_opts = common.add_argument_group("Spark")
    spark_opts.add_argument(
        "--master",
        help="classic local master, e.g. local[4] (default: local[*], or $DEDUP_SPARK_MASTER)",
    )
    spark_opts.add_argument(
        "--remote",
        type=remote_url,
        help="Spark Connect: sc://host:15002, or local[2] for a local server "
        "(default: $SPARK_REMOTE when set)",
    )
    spark_opts.add_argument(
        "--driver-host",
        type=host_name,
        metavar="HOST",
        help="the address a cluster's executors on other hosts reach the driver at, which it "
        "listens on (spark.driver.host; default: 127.0.0.1, this machine only)",
    )
    spark_opts.add_argument(
        "--spark-ui",
        type=spark_ui,
        metavar="HOST:PORT",
        help="where Spark's UI listens, or off (default: 127.0.0.1 on port 4040 or the next "
        "free one; watch: off)",
    )
    common.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")

    return common


def window_policy(window: str, *, partitioning: bool, bounds: Bounds = "service") -> DedupPolicy:
    """The policy ``--window`` and ``--partitioning`` name; an unreadable or out-of-range
    window (an overflow too: ``P99999999999D``) is a one-line error."""
    try:
        return DedupPolicy(window, partitioning=partitioning, bounds=bounds)  # type: ignore[arg-type]
    except OverflowError as exc:
        raise CommandError(f"--window {excerpt(window)}: too long for a window") from exc
    except ValueError as exc:
        raise CommandError(f"--window {excerpt(window)}: {exc}") from exc
