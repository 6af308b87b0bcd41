"""The tests mirror the package: a module ``src/dedup_lib/<folder>/<name>.py`` is tested by
``tests/<folder>/test_<name>.py`` (or ``test_<name>_<package>.py``, where two packages hold a
module of that name: ``tests/cli/test_watch_cli.py``). At least three modules in four have
theirs, and every module of the live monitor does (issue 72)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dedup_lib"
TESTS = ROOT / "tests"
#: The share of modules with a test file of their name, at least.
SHARE = Fraction(3, 4)
#: The package whose every module has one.
WHOLE = "live"


def _modules() -> list[Path]:
    """The package's modules, relative to it: no ``__init__.py``, no resources."""
    return [
        path.relative_to(SRC)
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "__init__.py" and "resources" not in path.parts
    ]


def _mirror_of(module: Path) -> Path | None:
    """The test file of ``module`` (relative to the package), None if it has none."""
    folder = TESTS / module.parent
    names = [f"test_{module.stem}.py"]
    if module.parent.name:
        names.append(f"test_{module.stem}_{module.parent.name}.py")
    return next((folder / n for n in names if (folder / n).is_file()), None)


def test_three_modules_in_four_have_a_test_file_of_their_name() -> None:
    modules = _modules()
    tested = [m for m in modules if _mirror_of(m) is not None]
    untested = sorted(str(m) for m in modules if _mirror_of(m) is None)
    assert Fraction(len(tested), len(modules)) >= SHARE, (len(tested), len(modules), untested)


def test_every_live_module_has_a_test_file_of_its_name() -> None:
    live = [m for m in _modules() if m.parts[0] == WHOLE]
    assert live
    assert [str(m) for m in live if _mirror_of(m) is None] == []


def test_test_file_names_are_unique_across_the_tests() -> None:
    """The tests have no ``__init__.py`` (pytest's prepend import mode): two test files of
    one name would be one module."""
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
