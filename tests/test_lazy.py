"""lazy: a package's names loaded on first use, each looked up once, a module named as one;
an unknown name an AttributeError as Python's own. No Spark."""

from __future__ import annotations

import json
import os.path
import sys
import types
from collections.abc import Iterator

import pytest

from dedup_lib.lazy import lazy_names

PACKAGE = "dedup_lib_lazy_test_package"


@pytest.fixture
def package() -> Iterator[types.ModuleType]:
    module = types.ModuleType(PACKAGE)
    sys.modules[PACKAGE] = module
    module.__getattr__ = lazy_names(  # type: ignore[method-assign]
        PACKAGE, {"dumps": "json"}, {"paths": "os.path"}
    )
    yield module
    del sys.modules[PACKAGE]


def test_a_name_is_read_from_its_module_on_first_use_and_kept(
    package: types.ModuleType,
) -> None:
    assert "dumps" not in vars(package)
    assert package.dumps is json.dumps
    assert vars(package)["dumps"] is json.dumps
    assert package.paths is os.path


def test_an_unknown_name_is_an_attribute_error(package: types.ModuleType) -> None:
    with pytest.raises(AttributeError, match=f"module '{PACKAGE}' has no attribute 'loads'"):
        _ = package.loads
    assert not hasattr(package, "loads")
