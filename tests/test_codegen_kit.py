"""The tests' switch between interpreted and compiled expressions (``codegen_kit``)."""

from __future__ import annotations

import shlex

from codegen_kit import COMPILED, INTERPRETED, compiled, interpreted_submit_args


def test_a_child_keeps_the_runs_properties_file_and_interprets():
    given = {"PYSPARK_SUBMIT_ARGS": "--properties-file '/a b/spark-defaults.conf' pyspark-shell"}
    args = shlex.split(interpreted_submit_args(given))
    assert args[:2] == ["--properties-file", "/a b/spark-defaults.conf"]
    assert args[-1] == "pyspark-shell"
    assert {a for a in args if "=" in a} == {f"{k}={v}" for k, v in INTERPRETED.items()}
    assert shlex.split(interpreted_submit_args({}))[-1] == "pyspark-shell"


def test_compiled_within_the_block_interpreted_after(spark):
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    with compiled(spark):
        assert {k: spark.conf.get(k) for k in COMPILED} == COMPILED
    assert {k: spark.conf.get(k) for k in INTERPRETED} == INTERPRETED
