"""The hostile corpus (``hostile_kit``) on every surface an analyst opens, in Chromium.

Entity names, MessageIds, partition keys, session ids, senders, causes and file names carry
markup, a right-to-left override and a 10 kB value. Each surface must show them as text: a
test fails on any dialog, any element or handler made from the data, any navigation away,
any console error, a bidirectional override or a 10 kB value drawn whole. The surfaces: each
notebook in JupyterLab (Run All on the corpus, then the explorer's controls, every hostile
entity picked and a hostile window typed) and the postmortem report opened from disk; the
page of ``dedup-lib explore`` is ``test_explore_page.py``'s. Screenshots of each land in the
screenshots folder.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dedup_lib.text import SHORT, shown
from hostile_kit import HOSTILE_ENTITIES, IMG, SCRIPT, SENDS_NAME, SVG, Corpus, watch
from lab_kit import CHART_DRAWN_JS, EXPLORER, NOTEBOOKS, Explorer, Lab, Notebook

#: Run All of a notebook on the corpus, as a user sets its parameters.
NOTEBOOK_PARAMETERS = {
    "04_incident_postmortem.ipynb": lambda corpus: {
        "INPUT": str(corpus.sends),
        "KEPT": str(corpus.kept),
    },
}


#: The page's charts, and how many are drawn (with a trace, or empty by design saying why).
CHARTS_JS = f"""() => {{
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    return [plots.length, plots.filter({CHART_DRAWN_JS}).length];
}}"""


def _parameters(notebook: str, corpus: Corpus) -> dict[str, Any]:
    made = NOTEBOOK_PARAMETERS.get(notebook)
    return made(corpus) if made else {"INPUT": str(corpus.sends)}


@pytest.mark.parametrize("notebook_name", NOTEBOOKS)
def test_every_notebook_shows_hostile_data_as_text(
    browser: Any, lab: Lab, kernel: str, hostile: Corpus, notebook_name: str, screenshots: Path
) -> None:
    name = lab.parameterized(notebook_name, _parameters(notebook_name, hostile), "hostile")
    notebook = Notebook.open(browser, lab, name, kernel)
    seen = watch(notebook.page, console=False)  # the notebook records console errors itself
    try:
        notebook.run_all()
        problems = notebook.problems() + seen.problems(notebook.page)
        notebook.screenshot(screenshots / f"{Path(notebook_name).stem}.png")
        if notebook_name == EXPLORER and not problems:
            problems += _every_control(Explorer(notebook, screenshots), seen)
        if notebook_name == NOTEBOOKS[0]:
            problems += _the_read_is_told_as_text(notebook)
    finally:
        notebook.close()
    if problems:
        pytest.fail(f"{notebook_name} on the hostile corpus:\n" + "\n".join(problems), False)


def _the_read_is_told_as_text(notebook: Notebook) -> list[str]:
    """Below its counts, notebook 01 tells how the file's nanosecond times were read, naming
    the file as its characters."""
    text = notebook.page.inner_text(".jp-NotebookPanel")
    if f"{SENDS_NAME}: nanosecond timestamps" in text:
        return []
    return [f"{NOTEBOOKS[0]} does not tell how the times were read: {text[:400]}"]


def _every_control(explorer: Explorer, seen: Any) -> list[str]:
    """Each hostile entity picked, a hostile window typed, the slider dragged: what went wrong."""
    explorer.cell.scroll_into_view_if_needed()
    state = explorer.state()
    entity = explorer.control("entity").locator("select")
    for name in HOSTILE_ENTITIES:
        entity.select_option(label=shown(name, SHORT))
        state = explorer.settled(state)
        explorer.shot(f"entity-{HOSTILE_ENTITIES.index(name)}")
        state.title(shown(name, SHORT))  # the chart's title names the entity, as its characters
    box = explorer.control("or type").locator("input")
    box.fill(SVG)
    box.press("Enter")
    state = explorer.settled(state)
    explorer.shot("hostile-window")
    assert "<svg data-pwn" in state.text, state.text[:500]  # the error quotes it, as text
    explorer.drag(explorer.control("window").locator(".noUi-handle").first, 60)
    explorer.settled(state)
    return seen.problems(explorer.page) + explorer.notebook.console


def test_the_report_opened_from_disk_shows_hostile_data_as_text(
    browser: Any, hostile_report: Path, screenshots: Path
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    seen = watch(page)
    page.goto(hostile_report.as_uri())
    # Polled from here: the report's policy forbids the eval that wait_for_function runs.
    deadline = time.monotonic() + 60
    while (charts := page.evaluate(CHARTS_JS))[0] > charts[1] and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert charts[0] >= 3  # over the incident: sends and drops, delays, ids held
    assert charts[1] == charts[0], f"{charts[0] - charts[1]} chart(s) not drawn"
    page.screenshot(path=str(screenshots / "report.png"), full_page=True)
    text = page.inner_text("body")
    problems = seen.problems(page)
    page.close()
    assert problems == []
    assert IMG in text  # the entity of the report, in its title and tables
    assert SCRIPT in text  # another, in the verdicts per entity
    assert SENDS_NAME in text  # the file name, in the input's table
