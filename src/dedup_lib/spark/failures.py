"""Spark's exceptions, classic and Connect, and their first line for a one-line error."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exceptions Spark raises (classic and Connect); py4j is imported only when present,
    as a Connect-only install has none."""
    from pyspark.errors import PySparkException

    found: list[type[BaseException]] = [PySparkException]
    try:
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        found.append(Py4JError)
    return tuple(found)


def spark_message(exc: BaseException | str) -> str:
    """The first meaningful line of a Spark error (or of its text), without the Py4J and Java
    class prefixes."""
    for line in str(exc).splitlines():
        line = line.strip().removeprefix(": ")
        if line and not line.startswith("An error occurred while calling"):
            line = re.sub(r"^[\w.$]+(Exception|Error): ", "", line)
            return re.sub(r"^\[[A-Z_.]+\]\s*|\s*SQLSTATE: \w+\.?$", "", line)
    return "Spark error" if isinstance(exc, str) else type(exc).__name__
