"""How the tests' JVMs evaluate expressions: interpreted on inputs of test size, compiled on
the samples.

Spark compiles each new plan's expressions to Java before it runs them. On tens to thousands
of rows the compiling costs more than it saves (test_reconcile 238 s -> 182 s interpreted;
two own-data notebook runs 136 s -> 86 s); on the day sample's 200 k sends it is the other way
round (``test_notebook_figures`` 199 s -> 133 s compiled, ``test_cli`` 154 s -> 118 s,
2026-11-27, one after the other). Spark gives the same results in both modes: its own test
suite runs both. Users and the benchmarks keep the compiled default. :func:`configured` sets
any of a session's settings for a block (these, or the shuffle partitions of ``spread_keys``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

#: Expressions evaluated by Spark's interpreter, no generated code.
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: Spark's defaults: whole-stage code generation, interpreted only where compiling fails.
COMPILED = {
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}


def in_kernel(settings: Mapping[str, str]) -> str:
    """Code that sets ``settings`` on the session of the kernel it runs in (``get_spark``),
    leaving no name behind: for a kernel the tests share, e.g. JupyterLab's."""
    sets = "".join(f"_spark.conf.set({k!r}, {v!r})\n" for k, v in settings.items())
    return f"from dedup_lib import get_spark as _get\n_spark = _get()\n{sets}del _get, _spark"


@contextlib.contextmanager
def configured(spark: Any, settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` on ``spark`` within the block, each as it was before it after."""
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def compiled(spark: Any) -> contextlib.AbstractContextManager[None]:
    """Spark compiles expressions within the block, then evaluates them as before it."""
    return configured(spark, COMPILED)
