"""The tests' switch between interpreted and compiled expressions (``codegen_kit``)."""

from __future__ import annotations

import dedup_lib
from codegen_kit import COMPILED, INTERPRETED, compiled, in_kernel


def test_the_kernel_code_sets_each_setting_on_its_session_and_leaves_no_name(monkeypatch):
    set_on: dict[str, str] = {}

    class Session:
        class conf:  # noqa: N801 - as a SparkSession's attribute
            set = staticmethod(set_on.__setitem__)

    monkeypatch.setattr(dedup_lib, "get_spark", Session)
    names: dict[str, object] = {}
    exec(in_kernel(INTERPRETED), names)  # the code the test hands a kernel
    assert set_on == INTERPRETED
    assert [n for n in names if n != "__builtins__"] == []


def test_compiled_within_the_block_interpreted_after(spark):
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    with compiled(spark):
        assert {k: spark.conf.get(k) for k in COMPILED} == COMPILED
    assert {k: spark.conf.get(k) for k in INTERPRETED} == INTERPRETED
