"""Spark's log: where it goes (:func:`spark_log_path`, under :func:`cache_dir`), the
log4j2 settings a JVM started here reads, and the process-wide redirection of file
descriptors 1 and 2 while a JVM starts (:func:`output_to`), so that nothing Spark prints
reaches the terminal, a notebook cell or a report."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import sys
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from dedup_lib.spark.jvm_options import quoted_option, with_java_options

if TYPE_CHECKING:
    from collections.abc import Iterator


#: Spark's log is started afresh past this size; the previous one is kept as ``spark.log.1``.
LOG_ROLL_BYTES = 20 * 1024 * 1024


#: How Python's lines in Spark's log look (py4j's, pyspark's, the command line's).
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


#: The log4j2 configuration a JVM started by :func:`get_spark` reads: everything to the log file.
LOG4J2_PROPERTIES = files("dedup_lib") / "resources" / "log4j2.properties"


def cache_dir() -> Path:
    """The library's own folder for what it builds and logs: ``DEDUP_LIB_CACHE``, else
    ``dedup_lib`` in the user's cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``)."""
    explicit = os.environ.get("DEDUP_LIB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dedup_lib"


def spark_log_path() -> Path:
    """Where Spark's log goes: ``$DEDUP_LOG_DIR/spark.log``, else ``spark.log`` in
    :func:`cache_dir`, beside the compiled replay kernel."""
    folder = os.environ.get("DEDUP_LOG_DIR")
    return (Path(folder).expanduser() if folder else cache_dir()) / "spark.log"


def _java_option(name: str, value: str) -> str:
    """``-Dname=value`` quoted for spark-submit's option parser, so a path with spaces or
    backslashes stays one option."""
    return quoted_option(f"-D{name}={value}")


def _log_settings(log: Path, settings: dict[str, str]) -> dict[str, str]:
    """``settings`` with the driver JVM's options extended to log to ``log`` only."""
    config = Path(str(LOG4J2_PROPERTIES))
    return with_java_options(
        settings,
        [
            _java_option("log4j2.configurationFile", str(config)),
            _java_option("dedup.spark.log", str(log)),
        ],
    )


def log_handler(log: Path | None = None) -> logging.Handler:
    """A logging handler that appends Python's records to Spark's log, in :data:`LOG_FORMAT`
    (opened on the first record, so an idle handler creates no file)."""
    handler = logging.FileHandler(log or spark_log_path(), delay=True, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler


def log_error(title: str, details: str) -> None:
    """Append an error, one ``ERROR`` line then its details (a traceback), to Spark's log:
    the place a one-line error sends whoever needs more. Nothing when it cannot be written."""
    log = spark_log_path()
    stamp = dt.datetime.now(dt.UTC).strftime("%y/%m/%d %H:%M:%S")
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"{stamp} ERROR {title}\n{details.rstrip(chr(10))}\n")
    except OSError:
        pass


def _prepare_log(log: Path) -> bool:
    """Create the log's folder, start a fresh log past :data:`LOG_ROLL_BYTES`, and send
    py4j's and pyspark's Python loggers there too (without a handler, Python prints their
    warnings on stderr). False when the folder cannot be made: Spark then logs as it would."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_ROLL_BYTES:
            log.replace(log.with_name(log.name + ".1"))
    for name in ("py4j", "pyspark"):
        logger = logging.getLogger(name)
        if not any(getattr(h, "dedup_spark_log", False) for h in logger.handlers):
            handler = log_handler(log)
            handler.dedup_spark_log = True  # type: ignore[attr-defined]
            logger.addHandler(handler)
    return True


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[None]:
    """File descriptors 1 and 2 point at ``log`` for the ``with`` block, so a process started
    there writes to ``log`` for its whole life: the JVM what it prints outside log4j (its own
    warnings, "Using incubator modules", Python workers' stderr), which ipykernel would
    forward into a notebook cell; a Jupyter kernel its own warnings."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = (os.dup(1), os.dup(2))
    except (OSError, ValueError):
        yield
        return
    try:
        with open(log, "ab") as target:
            os.dup2(target.fileno(), 1)
            os.dup2(target.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
