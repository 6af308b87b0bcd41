"""Run each notebook and keep only the outputs of its NBVAL_CHECK_OUTPUT cells.

Those stored outputs are what nbval compares in CI (`pytest --nbval-lax`); every other cell
is committed without output, so notebooks stay small and diffs readable.

    .venv/bin/python tools/store_checked_outputs.py notebooks/*.ipynb
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbconvert.preprocessors import ExecutePreprocessor

MARK = "# NBVAL_CHECK_OUTPUT"


def store(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    ExecutePreprocessor(timeout=1200, kernel_name="python3").preprocess(
        nb, {"metadata": {"path": str(path.parent)}}
    )
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.source.startswith(MARK):
            cell.outputs = [o for o in cell.outputs if o.get("name") != "stderr"]
        else:
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
    print(f"stored {path}")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        store(Path(name))
