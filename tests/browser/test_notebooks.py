"""Every notebook, opened in JupyterLab and run all in Chromium, as a new user would.

Fails on what that user would see as broken: an error output, Spark or Java log text on
stderr, a widget left at "Loading widget..." or shown as its text repr, a plotly chart
without traces, a cell not run, a browser console error. Each notebook's full page lands in
the screenshots folder; the seconds Run All took are printed (``-s``) and recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lab_kit import EXPLORER, Notebook


def test_notebook_runs_clean(
    run: Callable[[str], Notebook],
    notebook_name: str,
    screenshots: Path,
    record_property: Callable[[str, object], None],
) -> None:
    notebook = run(notebook_name)
    notebook.screenshot(screenshots / f"{Path(notebook_name).stem}.png")
    problems = notebook.problems()
    record_property("run_all_seconds", round(notebook.seconds, 1))
    print(f"{notebook_name}: Run All took {notebook.seconds:.1f} s")
    if notebook_name != EXPLORER:
        # Open, the page stays connected to the shared kernel: every widget a later notebook
        # makes would load in it too (four pages loading the explorer's 5 MB module at once
        # overran anywidget's two seconds to initialize a model).
        notebook.close()
    if problems:
        pytest.fail(f"{notebook_name}:\n" + "\n".join(problems), pytrace=False)
