"""Every notebook in JupyterLab on the minimal input an analyst can have: a MessageId and a
send time per send, nothing else (``user_corpus``). Run All as a user does, after setting
``INPUT`` in the parameters cell; the run must be clean, and where the samples show
ground-truth or content figures, the notebook says in words that this input cannot tell them.
Screenshots of each land in the screenshots folder. The other inputs of the corpus run
headless (``tests/workbench/test_user_data.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lab_kit import EXPLORER, NOTEBOOKS, Lab, Notebook
from user_corpus import write_user_corpus

#: What each notebook must say on the minimal input, where the samples show figures.
SAID = {
    "01_load_telemetry.ipynb": ["No row was quarantined", "Left out: the tour reads"],
    "02_window_explorer.ipynb": [
        "no ground truth",
        "no content to compare",
        "no partition_key or session_id column",
        "No entity settings were given",
    ],
    "03_window_sizing.ipynb": ["no ground truth", "no window is picked"],
    "04_incident_postmortem.ipynb": [
        "no ground truth",
        "no content to compare",
        "No export of what the broker kept",
    ],
}


@pytest.fixture(scope="module")
def minimal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    inputs = {u.name: u for u in write_user_corpus(tmp_path_factory.mktemp("user-corpus"))}
    return inputs["minimal"].path


@pytest.mark.parametrize("notebook_name", NOTEBOOKS)
def test_every_notebook_on_the_minimal_input_says_what_it_cannot_tell(
    browser: Any, lab: Lab, minimal: Path, notebook_name: str, screenshots: Path
) -> None:
    name = lab.parameterized(notebook_name, {"INPUT": str(minimal)}, "minimal")
    notebook = Notebook.open(browser, lab, name)
    try:
        notebook.run_all()
        problems = notebook.problems()
        notebook.screenshot(screenshots / f"{Path(notebook_name).stem}.png")
        text = notebook.page.inner_text(".jp-NotebookPanel")
    finally:
        lab.shutdown(name)
        notebook.close()
    if problems:
        pytest.fail(f"{notebook_name} on the minimal input:\n" + "\n".join(problems), False)
    missing = [words for words in SAID[notebook_name] if words not in text]
    assert not missing, f"{notebook_name} does not say: {missing}"
    if notebook_name == EXPLORER:
        assert "resends_caught" not in text  # no table of the figures it cannot know
