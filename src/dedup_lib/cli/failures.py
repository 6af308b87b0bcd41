"""The one line an error becomes on stderr (:func:`error_line`): the library's message, a
Spark error's first meaningful line, or an internal error with its traceback in Spark's
log."""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING

from dedup_lib.cli.options import PROG
from dedup_lib.errors import DedupLibError, printable
from dedup_lib.spark import (
    log_error,
    spark_errors,
    spark_log_path,
    spark_message,
)

if TYPE_CHECKING:
    pass


def _from_spark(exc: BaseException) -> bool:
    """True when ``exc`` is a Spark error or was raised because of one."""
    errors = spark_errors()
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, errors):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def log_details(command: str, exc: BaseException) -> None:
    """Append ``exc``'s traceback to Spark's log, for an error whose one line is not enough."""
    log_error(f"{PROG} {command}: {type(exc).__name__}", "".join(traceback.format_exception(exc)))


def error_line(command: str, exc: BaseException) -> str:
    """The one line an error becomes on stderr, escaped (no control characters from data):
    the library's message as it is; a Spark error's first meaningful line; anything else as
    an internal error, its traceback in the log. Each names the log when Spark was involved."""
    log = spark_log_path()
    if isinstance(exc, DedupLibError):
        text = str(exc)
        if _from_spark(exc):
            text += f" (Spark's log: {log})"
    elif _from_spark(exc):
        log_details(command, exc)
        text = f"{spark_message(exc)} (Spark's log: {log})"
    else:
        log_details(command, exc)
        text = f"internal error: {type(exc).__name__}: {exc} (details: {log})"
    return printable(f"{PROG} {command}: error: {text}")
