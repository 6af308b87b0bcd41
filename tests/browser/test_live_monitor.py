"""Notebook 05 in JupyterLab while telemetry lands: its charts redraw in place.

The test points the notebook at a folder of its own, lands the first file of the incident
sample, runs all (the last cell lets the monitor run for a while), then lands the rest while
the notebook runs, and requires the sends drawn in the first chart to grow, without a problem
a user would see (:meth:`lab_kit.Notebook.problems`, as for every notebook). This is notebook
05's run in JupyterLab on the samples: ``test_notebooks.py`` runs the others.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dedup_lib import land_in_steps, sample_path
from lab_kit import DONE_JS, LIVE, RUN_ALL_JS, Lab, Notebook

#: The sends drawn in the notebook's first chart: every bar of every trace, summed.
DRAWN_SENDS_JS = """() => {
    const plot = document.querySelector('.jp-NotebookPanel .js-plotly-plot');
    if (!plot || !plot.data) return 0;
    return plot.data.reduce((sum, t) => sum + (t.y || []).reduce((a, b) => a + b, 0), 0);
}"""


def _drawn(page: Any, above: float, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        drawn = float(page.evaluate(DRAWN_SENDS_JS) or 0)
        if drawn > above:
            return drawn
        page.wait_for_timeout(500)
    raise AssertionError(f"the first chart still shows {above:,.0f} sends after {timeout} s")


def test_the_charts_redraw_as_files_land(
    browser: Any, lab: Lab, kernel: str, screenshots: Path, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    feeder = land_in_steps(
        sample_path("incident.parquet"), str(landing), files=4, every=2, start=False
    )
    # The monitor stops RUN_FOR seconds after its first verdicts: time for the next file to
    # land and be judged (6 to 12 s here), not much more, the suite waiting on it.
    parameters = {"SOURCE": str(landing), "RUN_FOR": 20, "WORK": str(tmp_path / "work")}
    notebook = Notebook.open(browser, lab, lab.parameterized(LIVE, parameters, "live"), kernel)
    try:
        notebook.page.evaluate(RUN_ALL_JS)
        first = _drawn(notebook.page, 0, timeout=180)
        feeder.start()
        later = _drawn(notebook.page, first, timeout=60)
        notebook.screenshot(screenshots / "05_live_monitor-landing.png")
        notebook.page.wait_for_function(DONE_JS, timeout=180_000, polling=500)
        problems = notebook.problems()
    finally:
        notebook.close()
    assert later > first
    assert not problems, "\n".join(problems)
