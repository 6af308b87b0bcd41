"""Each notebook is a jupytext pair: notebooks/0X_name.py (the reviewed source) and its .ipynb.

JupyterLab with jupytext saves an edit to both, and ``make notebooks`` syncs them; these tests
fail when the two disagree (an edit to one side only), when the committed .ipynb carries
outputs, or when it does not name the project's kernel.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNELSPEC = {"name": "dedup-lib", "display_name": "dedup-lib (Spark)", "language": "python"}
SOURCES = sorted(NOTEBOOKS.glob("0*.py"))
FIX = "run `make notebooks` to sync them"


def test_every_notebook_has_both_sides():
    stems = {p.stem for p in SOURCES}
    assert stems, "no notebooks/0*.py found"
    assert stems == {p.stem for p in NOTEBOOKS.glob("0*.ipynb")}


def _cells(path: Path) -> list[tuple[str, str, list[str]]]:
    nb = jupytext.read(path)
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_py_and_ipynb_have_the_same_cells(source):
    text, notebook = _cells(source), _cells(source.with_suffix(".ipynb"))
    for number, (left, right) in enumerate(zip(text, notebook, strict=False), start=1):
        assert left == right, f"{source.stem}: cell {number} differs between .py and .ipynb; {FIX}"
    assert len(text) == len(notebook), f"{source.stem}: not the same number of cells; {FIX}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_ipynb_is_committed_stripped_and_names_the_kernel(source):
    nb = jupytext.read(source.with_suffix(".ipynb"))
    assert dict(nb.metadata.get("kernelspec", {})) == KERNELSPEC
    assert dict(jupytext.read(source).metadata.get("kernelspec", {})) == KERNELSPEC
    with_outputs = [
        number
        for number, cell in enumerate(nb.cells, start=1)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not with_outputs, f"{source.stem}: cells {with_outputs} have outputs; {FIX}"


#: What each notebook lets a user set (issue 33): INPUT everywhere, the others where they apply.
PARAMETERS = {
    "01_load_telemetry": {"INPUT", "FORMAT", "MAPPING"},
    "02_window_explorer": {"INPUT", "FORMAT", "MAPPING", "WINDOW", "CONTENT", "ENTITIES"},
    "03_window_sizing": {"INPUT", "FORMAT", "MAPPING", "TARGET"},
    "04_incident_postmortem": {
        "INPUT", "FORMAT", "MAPPING", "WINDOW", "PARTITIONING", "ENTITY", "START", "END",
        "CONTENT", "EMBED_CHARTS", "KEPT", "KEPT_FORMAT", "KEPT_MAPPING",
    },
    "05_live_monitor": {
        "SOURCE", "INPUT", "FORMAT", "MAPPING", "WINDOW", "PARTITIONING", "LATENESS", "CONTENT",
        "WORK", "RUN_FOR",
    },
}  # fmt: skip


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_each_notebook_starts_with_one_parameters_cell_papermill_reads(source):
    """papermill injects parameters after the first cell tagged ``parameters``, and reads its
    names and defaults (a comment it cannot parse would hide a parameter from ``--help``)."""
    from papermill.translators import PythonTranslator

    nb = jupytext.read(source.with_suffix(".ipynb"))
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].metadata.get("tags") == ["parameters"]
    assert sum("parameters" in c.metadata.get("tags", []) for c in code) == 1
    read = PythonTranslator.inspect(code[0])
    assert {p.name for p in read} == PARAMETERS[source.stem]
    assert next(p for p in read if p.name == "INPUT").default == "None"  # the samples
