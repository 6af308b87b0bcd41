"""Every example a reader may copy runs, as written: the Examples sections of the public
names' docstrings (doctest, on the run's Spark session) and the Python blocks of the README
and the guides (run in a fresh folder, one namespace per page). docs/instrumentation.md's
blocks, fragments of a sending application, run in ``test_instrumentation.py``; the
``dedup-lib`` command lines of the README and the guides in ``test_command_lines.py``.

Each example shows the values it produces, matched exactly (no ``+ELLIPSIS``):
``test_docstrings.py`` fails an example that elides or skips its output."""

from __future__ import annotations

import doctest
import inspect
import itertools

import pytest

import dedup_lib
from pages_kit import BLOCK, PAGES, ROOT, enter_folder

FLAGS = doctest.NORMALIZE_WHITESPACE


def _members(klass: type) -> dict[str, tuple[type, object]]:
    """The public members of an exported class, by name, in source order: its own, then those
    of the library's classes it inherits (a mixin's); a name defined again counts once, where
    the class that wins defines it."""
    members: dict[str, tuple[type, object]] = {}
    for owner in klass.__mro__:
        if owner.__module__.startswith("dedup_lib"):
            for name, value in vars(owner).items():
                if not name.startswith("_"):
                    members.setdefault(name, (owner, value))
    return members


def _is_method(value: object) -> bool:
    """A method a reader calls: not a property, nor a dataclass field's default."""
    return inspect.isfunction(value) or isinstance(value, classmethod | staticmethod)


def _tests(name: str) -> list[doctest.DocTest]:
    """The docstring tests of one public name, with examples, in the order they run: a
    function's; a class's own, then each of its members' in source order."""
    obj = getattr(dedup_lib, name)
    finder = doctest.DocTestFinder(recurse=True)
    if not inspect.isclass(obj):
        return [t for t in finder.find(obj, name) if t.examples]
    members = _members(obj)
    order = {f"{name}.{member}": i for i, member in enumerate(members)}
    found = {t.name: t for t in finder.find(obj, name) if t.examples and t.name == name}
    for owner in {owner for owner, _ in members.values()}:
        for test in finder.find(owner, name, module=inspect.getmodule(owner)):
            member = test.name.removeprefix(f"{name}.")
            if test.examples and test.name in order and members[member][0] is owner:
                found[test.name] = test
    return sorted(found.values(), key=lambda t: order.get(t.name, -1))


def _documented() -> list[str]:
    """The public names whose docstrings (or their members') hold examples."""
    return [n for n in dedup_lib.__all__ if n != "__version__" and _tests(n)]


def _public_classes() -> list[type]:
    return [
        getattr(dedup_lib, n) for n in dedup_lib.__all__ if inspect.isclass(getattr(dedup_lib, n))
    ]


def test_every_public_function_has_an_example() -> None:
    documented = set(_documented())
    functions = {n for n in dedup_lib.__all__ if inspect.isfunction(getattr(dedup_lib, n, None))}
    missing = sorted(functions - documented)
    assert not missing, f"public functions without Examples: {missing}"


def _parameters_listed(doc: str) -> set[str]:
    """The names a numpydoc Parameters section lists (``start, end : str`` lists two)."""
    lines = doc.partition("\nParameters\n----------\n")[2].splitlines()
    names: set[str] = set()
    for line, below in itertools.pairwise([*lines, ""]):
        if below.startswith("---"):
            break
        if line and not line[0].isspace():
            names |= {n.strip().lstrip("*") for n in line.partition(" : ")[0].split(",")}
    return names


def test_every_public_method_has_an_example() -> None:
    """Each method of an exported class (and of the mixins it inherits) has a numpydoc
    Examples section, and names each of its parameters under Parameters; a property's short
    docstring needs neither."""
    missing = []
    for klass in _public_classes():
        for member, (_, value) in _members(klass).items():
            if not _is_method(value):
                continue
            function = getattr(value, "__func__", value)
            doc = inspect.getdoc(function) or ""
            if ">>> " not in doc.partition("\nExamples\n--------\n")[2]:
                missing.append(f"{klass.__name__}.{member}: no Examples")
            listed = _parameters_listed(doc)
            for parameter in list(inspect.signature(function).parameters)[1:]:
                if parameter not in listed:
                    missing.append(f"{klass.__name__}.{member}: parameter {parameter} not listed")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("name", _documented())
def test_the_docstring_examples_run(spark, tmp_path, monkeypatch, name) -> None:
    """A function's examples; a class's in one namespace, its docstring's first, then each
    method's in source order, continuing from the instance the class's example built (one
    load of a sample per class, not one per method)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEDUP_INPUT", raising=False)  # notebook_input's example sets its own
    tests = _tests(name)
    shared = tests[0].globs if inspect.isclass(getattr(dedup_lib, name)) else None
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    try:
        for test in tests:
            if shared is not None:
                test.globs = shared
            runner.run(test, out=report.append, clear_globs=shared is None)
    finally:
        _stop_monitors(shared or {})
    assert runner.failures == 0, "".join(report)


def _stop_monitors(namespace: dict[str, object]) -> None:
    """A live monitor an example left running (it failed before its ``stop``), stopped, and
    the namespace emptied."""
    from dedup_lib import LiveMonitor, Watch

    for value in namespace.values():
        if isinstance(value, Watch) and value.active:
            value.stop()
        if isinstance(value, LiveMonitor) and value.watch is not None and value.watch.active:
            value.stop()
    namespace.clear()


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
    enter_folder(tmp_path, monkeypatch)
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
