"""Every example a reader may copy runs, as written: the Examples sections of the public
names' docstrings (doctest, on the run's Spark session) and the Python blocks of the README
and the guides (run in a fresh folder, one namespace per page). docs/instrumentation.md's
blocks are fragments of a sending application, against a real Service Bus: not run."""

from __future__ import annotations

import doctest
import inspect
import re
import shutil
from pathlib import Path

import pytest

import dedup_lib
from dedup_lib import sample_path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _documented() -> list[str]:
    """The public names whose docstrings hold examples, with their methods'."""
    names = []
    for name in dedup_lib.__all__:
        if name == "__version__":
            continue
        found = doctest.DocTestFinder(recurse=True).find(getattr(dedup_lib, name), name)
        names += [t.name for t in found if t.examples]
    return sorted(set(names))


def test_every_public_function_has_an_example() -> None:
    documented = {n.split(".")[0] for n in _documented()}
    functions = {n for n in dedup_lib.__all__ if inspect.isfunction(getattr(dedup_lib, n, None))}
    missing = sorted(functions - documented)
    assert not missing, f"public functions without Examples: {missing}"


@pytest.mark.parametrize("name", _documented())
def test_the_docstring_examples_run(spark, tmp_path, monkeypatch, name) -> None:
    monkeypatch.chdir(tmp_path)
    head = name.partition(".")[0]
    tests = doctest.DocTestFinder(recurse=True).find(getattr(dedup_lib, head), head)
    (test,) = [t for t in tests if t.name == name]
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def _blocks() -> list[tuple[str, int]]:
    return [
        (str(page.relative_to(ROOT)), i)
        for page in PAGES
        for i, _ in enumerate(BLOCK.findall(page.read_text()))
    ]


@pytest.mark.parametrize(("page", "index"), _blocks())
def test_the_python_blocks_of_the_readme_and_guides_run(spark, tmp_path, monkeypatch, page, index):
    """Each block in a fresh folder (``landing/`` holding the incident sample, for the live
    guide's monitor), after the page's blocks before it; a name the page says comes from
    elsewhere (``result``) is given."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "landing").mkdir()
    shutil.copy(sample_path("incident.parquet"), tmp_path / "landing")
    blocks = BLOCK.findall((ROOT / page).read_text())
    namespace: dict[str, object] = {"__name__": "__example__"}
    if "result" in blocks[index] and not any("result =" in b for b in blocks[: index + 1]):
        namespace["result"] = _incident_result(spark)
    for block in blocks[: index + 1]:
        exec(compile(block, f"{page}, block {index}", "exec"), namespace)


def _incident_result(spark):
    from dedup_lib import DedupPolicy, detect_duplicates, load_telemetry, sample_path

    loaded = load_telemetry(spark, sample_path("incident.parquet"))
    return detect_duplicates(loaded.valid, DedupPolicy("PT10M"))
