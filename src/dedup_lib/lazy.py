"""Names a package loads on first use (PEP 562): its ``__init__`` stays light, and a name
pulls in Spark, pandas or widgets only when someone asks for it."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


def lazy_names(
    package: str, where: Mapping[str, str], modules: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name in ``where`` is read from the module
    named there, a name in ``modules`` is that module; each is kept in the package once
    loaded, so it is looked up once."""
    namespace = sys.modules[package].__dict__
    submodules = modules or {}

    def load(name: str) -> Any:
        if name in submodules:
            value = importlib.import_module(submodules[name])
        elif name in where:
            value = getattr(importlib.import_module(where[name]), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return load
