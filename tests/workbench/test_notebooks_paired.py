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


def test_the_postmortem_keeps_its_parameters_cell():
    """papermill injects the report's parameters after the cell tagged ``parameters``."""
    nb = jupytext.read(NOTEBOOKS / "04_incident_postmortem.py")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].metadata.get("tags") == ["parameters"]
    assert code[0].source.startswith("INPUT = None")
