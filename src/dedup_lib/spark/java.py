"""Java for a local Spark: found (``JAVA_HOME``, then PATH), its version checked (17 or
later), and the class-data archive a JVM starts from."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from dedup_lib.class_data import archive_options
from dedup_lib.errors import ToolMissingError
from dedup_lib.spark.logs import cache_dir

if TYPE_CHECKING:
    pass


MIN_JAVA = 17


class JavaNotFoundError(ToolMissingError):
    """Raised when no Java 17+ runtime is available for a local Spark session."""


def java_tool(name: str) -> str | None:
    """The path of a JDK tool (``java``, ``javac``): from ``JAVA_HOME`` first, as Spark does,
    else from PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / name
        if candidate.exists():
            return str(candidate)
    return shutil.which(name)


def java_version(java: str | None = None) -> int | None:
    """The major version of the Java runtime that Spark would start, or None if there is none."""
    java = java or java_tool("java")
    if java is None:
        return None
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def class_data_options(java_version: int) -> list[str]:
    """The options that start a local JVM of this machine's Java from its class-data archive
    in :func:`cache_dir` (:func:`~dedup_lib.class_data.archive_options`); none without Java."""
    java = java_tool("java")
    return archive_options(cache_dir() / "jvm", java, java_version) if java else []


def check_java() -> int:
    """Fail early, with what to do, when Java 17+ is missing (PySpark 4 needs it)."""
    java = java_tool("java")
    version = java_version(java)
    install = (
        "Install a Java 17+ runtime (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`; "
        "macOS: `brew install openjdk@17`; conda: `conda install -c conda-forge openjdk=17`) "
        "and put it on PATH or set JAVA_HOME. To use a remote Spark Connect server instead, "
        "set SPARK_REMOTE=sc://host:15002."
    )
    if version is None:
        where = f"`{java}` did not report a version" if java else "no `java` on PATH or JAVA_HOME"
        raise JavaNotFoundError(
            f"dedup_lib needs Java {MIN_JAVA}+ for local Spark: {where}. {install}"
        )
    if version < MIN_JAVA:
        raise JavaNotFoundError(
            f"dedup_lib needs Java {MIN_JAVA}+ for local Spark, but `{java}` is Java {version}. "
            + install
        )
    return version
