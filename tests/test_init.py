"""The public API is lazy: ``import dedup_lib`` loads none of the heavy libraries, and each
public name loads its module when it is first used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import dedup_lib

HEAVY = ("pyspark", "pandas", "numpy", "pyarrow", "plotly", "ipywidgets", "anywidget")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    return [name for name in HEAVY if name in loaded]


def test_importing_the_package_loads_no_heavy_library():
    assert _loaded_after("import dedup_lib; dedup_lib.__version__") == []


def test_a_light_name_loads_only_what_it_needs():
    assert _loaded_after("from dedup_lib import DedupPolicy, DedupLibError, escape") == []


def test_a_name_that_needs_spark_loads_it():
    assert "pyspark" in _loaded_after("from dedup_lib import detect_duplicates")


@pytest.mark.parametrize("name", dedup_lib.__all__)
def test_every_public_name_resolves_and_is_listed(name):
    assert getattr(dedup_lib, name) is not None
    assert name in dir(dedup_lib)


def test_an_unknown_name_is_an_attribute_error_that_names_it():
    with pytest.raises(AttributeError, match="'no_such_name'"):
        dedup_lib.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        from dedup_lib import no_such_name  # noqa: F401


def test_the_lazy_table_lists_the_public_names_and_no_other():
    lazy = {*dedup_lib._WHERE, *dedup_lib._MODULES, "__version__"}
    assert lazy == set(dedup_lib.__all__)
