"""``dedup-lib explore`` as a colleague sees it, on the hostile corpus (``hostile_kit``): the
page Voilà serves, opened with the token the command printed, shows the explorer, no code and
no error; its controls change the numbers; every hostile entity picked and a hostile window
typed show as text (no dialog, no element or handler from the data, no console error); and
SIGTERM, as a service manager sends it, stops the command, Voilà, its kernel and its Spark.
Before the visit, whoever lacks the token gets no page and starts no kernel. (The other
signals are ``tests/cli/test_explore_server.py``'s.)"""

from __future__ import annotations

import contextlib
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dedup_lib.text import SHORT, shown
from hostile_kit import HOSTILE_ENTITIES, SENDS_NAME, SVG, Corpus, watch
from serve_kit import refused_without_its_token, serve

pytestmark = pytest.mark.spark

#: The page is ready when the kernel has run it: Spark's start and the explorer's build, on a
#: busy two-core machine several minutes.
READY_MS = 600_000
CHANGE_MS = 120_000
#: A viewport tall enough for the whole explorer, controls to the last chart.
TALL = 2600

#: What the page may say in the browser's console without it being the page's fault: fonts and
#: MathJax from a CDN, unreachable offline.
OFFLINE = re.compile(r"Failed to load resource: net::ERR_(NAME_NOT_RESOLVED|INTERNET_DISCONNECTED)")


def _numbers(page: Any) -> str:
    """The text of every table on the page: the explorer's figures."""
    text: str = page.evaluate(
        "Array.from(document.querySelectorAll('table')).map(t => t.innerText).join('\\n')"
    )
    return text


def _wait_for_change(page: Any, before: str) -> str:
    page.wait_for_function(
        "before => Array.from(document.querySelectorAll('table')).map(t => t.innerText)"
        ".join('\\n') !== before && document.querySelectorAll('table').length > 0",
        arg=before,
        timeout=CHANGE_MS,
        polling=250,
    )
    return _numbers(page)


def _loaded(page: Any, screenshots: Path) -> None:
    page.wait_for_selector(".widget-slider, .dedup-explore-error", timeout=READY_MS)
    page.wait_for_function("document.querySelectorAll('table').length > 0", timeout=CHANGE_MS)
    # Voila scrolls inside its own container: a tall viewport shows the whole page
    for width in (1400, 1000):
        page.set_viewport_size({"width": width, "height": TALL})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(screenshots / f"1-loaded-{width}.png"))
    page.set_viewport_size({"width": 1400, "height": TALL})


def _no_code_and_no_error(page: Any) -> None:
    assert page.title() == "dedup-lib window explorer"
    body = page.inner_text("body")
    assert "Duplicate detection window explorer" in body
    assert SENDS_NAME in body  # the lede names the file, as its characters
    # no code: Voilà strips the sources, and no cell's input area is drawn
    assert page.locator(".jp-InputArea, .jp-CodeMirrorEditor, .cm-editor").count() == 0
    for code in ("load_telemetry", "WindowExplorer", "import ", "os.environ"):
        assert code not in body
    # no error: no traceback, no stderr block, no error line of the page's own
    assert page.locator(".dedup-explore-error").count() == 0
    assert page.locator('[data-mime-type="application/vnd.jupyter.stderr"]').count() == 0
    for broken in ("Traceback", "There was an error", "Error displaying widget"):
        assert broken not in body


def _controls_change_the_numbers(page: Any, screenshots: Path) -> None:
    assert page.locator(".widget-hslider").count() >= 1
    assert page.locator(".widget-text input").count() >= 1
    # both modes are on the toggle from the start; "enabled" is built in the background and
    # picking it waits for it
    assert page.locator(".widget-toggle-buttons button").count() == 2
    page.locator(".widget-toggle-buttons button", has_text="enabled").click()
    page.wait_for_function(
        "[...document.querySelectorAll('.gtitle')]"
        ".some(t => t.textContent.includes('partitioning enabled'))",
        timeout=READY_MS,
    )
    page.wait_for_function("!document.body.innerText.includes('being prepared')")
    first = _numbers(page)
    assert first
    window = page.locator(".widget-text input").first
    window.fill("PT30S")
    window.press("Enter")
    typed = _wait_for_change(page, first)
    page.screenshot(path=str(screenshots / "2-typed-PT30S.png"))
    assert typed != first
    handle = page.locator(".widget-hslider .noUi-handle").first
    box = handle.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 200, y, steps=10)
    page.mouse.up()
    dragged = _wait_for_change(page, typed)
    page.screenshot(path=str(screenshots / "3-dragged.png"))
    assert dragged != typed
    assert page.locator(".widget-text input").first.input_value() != "30s"


def _hostile_entities_and_window(page: Any, screenshots: Path) -> None:
    entity = page.locator(".widget-dropdown select").first
    for n, name in enumerate(HOSTILE_ENTITIES):
        entity.select_option(label=shown(name, SHORT))
        # the chart's title names the entity picked, as its characters
        page.wait_for_function(
            "name => [...document.querySelectorAll('.gtitle')]"
            ".some(t => t.textContent.includes(`, ${name}, window`))",
            arg=shown(name, SHORT),
            timeout=CHANGE_MS,
        )
        page.screenshot(path=str(screenshots / f"4-entity-{n}.png"))
    window = page.locator(".widget-text input").first
    window.fill(SVG)
    window.press("Enter")
    page.wait_for_function("document.body.innerText.includes('<svg data-pwn')")
    page.screenshot(path=str(screenshots / "5-hostile-window.png"))


@contextlib.contextmanager
def _seen_on_failure(page: Any, screenshots: Path) -> Iterator[None]:
    """A failure says what the page showed: a screenshot, the controls' values, the charts'
    titles and the explorer's message."""
    try:
        yield
    except BaseException as exc:
        page.screenshot(path=str(screenshots / "failed.png"))
        shown = page.evaluate(
            "() => ({entity: [...document.querySelectorAll('.widget-dropdown select')]"
            ".map(s => s.value), window: [...document.querySelectorAll('.widget-text input')]"
            ".map(i => i.value), titles: [...document.querySelectorAll('.gtitle')]"
            ".map(t => t.textContent), body: document.body.innerText.slice(0, 1500)})"
        )
        exc.add_note(f"the page when it failed ({screenshots / 'failed.png'}): {shown!r}")
        raise


def test_the_explorer_page_shows_the_explorer_and_hostile_data_as_text(
    browser: Any, screenshots: Path, hostile: Corpus
) -> None:
    with serve(hostile.sends) as served:
        refused_without_its_token(served)
        page = browser.new_page(viewport={"width": 1400, "height": TALL})
        seen = watch(page, ignore=OFFLINE)
        page.goto(served.url, timeout=READY_MS)
        with _seen_on_failure(page, screenshots):
            _loaded(page, screenshots)
            _no_code_and_no_error(page)
            _controls_change_the_numbers(page, screenshots)
            _hostile_entities_and_window(page, screenshots)
        problems = seen.problems(page)
        page.close()
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=60) == 0
        assert "stopped (SIGTERM)" in served.stderr()
        assert served.left_after() == []
    assert problems == []
