"""Chromium, driven by playwright, for the tests that look at pages as a user does.

The browser is Debian's ``chromium`` (playwright's own download is not used). Without it, or
without the ``playwright`` package, these tests skip and say how to install them. Screenshots
of each step land under ``build/screenshots/<test>/`` (``DEDUP_SCREENSHOTS`` moves them),
which CI keeps and git ignores.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lab_kit import CHROMIUM, EXPLORER, LIVE, NOTEBOOKS, Lab, Notebook

SCREENSHOTS = Path(os.environ.get("DEDUP_SCREENSHOTS", "build/screenshots")).resolve()
INSTALL = (
    "install Debian's Chromium (sudo apt-get install chromium) or set DEDUP_CHROMIUM to a "
    "Chromium binary; the playwright package comes with `pip install -e '.[test]'`"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the whole run."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"the playwright package is not installed: {INSTALL}")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}: {INSTALL}")
    with sync_playwright() as driver:
        chromium = driver.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def run(browser: Any, lab: Lab, kernel: str) -> Iterator[Callable[[str], Notebook]]:
    """``run(name)``: the notebook opened and run all, once per session (the first test that
    asks runs it; the explorer's tests reuse notebook 02's page, until another notebook runs)."""
    opened: dict[str, Notebook] = {}

    def get(name: str) -> Notebook:
        if name not in opened:
            opened[name] = Notebook.open(browser, lab, name, kernel)
            opened[name].run_all()
        return opened[name]

    yield get
    for notebook in opened.values():
        if not notebook.page.is_closed():
            notebook.close()


@pytest.fixture(params=[n for n in NOTEBOOKS if n not in (EXPLORER, LIVE)] + [EXPLORER])
def notebook_name(request: pytest.FixtureRequest) -> str:
    """The notebooks, the explorer last: its page stays for test_window_explorer's controls,
    and a notebook run after it would close its widgets. Not the live monitor: its run on the
    samples, as they land, is ``test_live_monitor.py``'s."""
    return str(request.param)


@pytest.fixture
def screenshots(request: pytest.FixtureRequest) -> Path:
    """An empty folder for this test's screenshots."""
    folder = SCREENSHOTS / re.sub(r"[^\w.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


class _NotebooksOnce:
    """The notebooks run once: in JupyterLab in Chromium (test_notebooks.py, and
    test_live_monitor.py for notebook 05, which fail on anything nbval would and on what only
    a browser shows) when that test is selected and can run here; else by nbval. Last, so
    the items are those left after ``-m``/``-k``."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        in_chromium = _notebooks_run_in_chromium(items)
        for item in items:
            name = item.nodeid.partition("::")[0].removeprefix("notebooks/")
            if item.nodeid.startswith("notebooks/") and name in in_chromium:
                why = f"run in JupyterLab in Chromium by {in_chromium[name]}"
                item.add_marker(pytest.mark.skip(reason=why))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_NotebooksOnce(), "dedup-notebooks-once")


def _notebooks_run_in_chromium(items: list[pytest.Item]) -> dict[str, str]:
    """The notebooks whose browser test is selected and can run here, with its id."""
    import importlib.util

    needed = ("playwright", "jupyterlab")
    if not (Path(CHROMIUM).is_file() and all(importlib.util.find_spec(m) for m in needed)):
        return {}
    found = {}
    for item in items:
        if item.nodeid.startswith("tests/browser/test_live_monitor.py::"):
            found[LIVE] = item.nodeid
        if item.nodeid.startswith("tests/browser/test_notebooks.py::"):
            callspec = getattr(item, "callspec", None)
            notebook = callspec.params.get("notebook_name") if callspec is not None else None
            if isinstance(notebook, str):
                found[notebook] = item.nodeid
    return found
