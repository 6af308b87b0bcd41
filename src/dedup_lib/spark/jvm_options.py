"""Options for a driver JVM started here, as spark-submit parses them."""

from __future__ import annotations


def quoted_option(option: str) -> str:
    """``option`` quoted for spark-submit's option parser: one option, spaces and all."""
    escaped = option.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def with_java_options(settings: dict[str, str], options: list[str]) -> dict[str, str]:
    """``settings`` with ``options`` after the driver JVM's options already there."""
    theirs = settings.get("spark.driver.extraJavaOptions", "")
    ours = " ".join(options)
    return {**settings, "spark.driver.extraJavaOptions": f"{theirs} {ours}".strip()}
