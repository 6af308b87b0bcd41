"""``dedup-lib explore`` as a colleague sees it: the page Voilà serves shows the explorer, no
code and no error, and its controls change the numbers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dedup_lib
from lab_kit import free_port

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
#: As a colleague would type it, from the checkout's root.
SAMPLE = "data/samples/day.parquet"
#: The page is ready when the kernel has run it: Spark's start and the explorer's build, on a
#: busy two-core machine several minutes.
READY_MS = 600_000
CHANGE_MS = 120_000
#: A viewport tall enough for the whole explorer, controls to the last chart.
TALL = 2600

#: What the page may say in the browser's console without it being the page's fault: fonts and
#: MathJax from a CDN, unreachable offline.
OFFLINE = re.compile(r"Failed to load resource: net::ERR_(NAME_NOT_RESOLVED|INTERNET_DISCONNECTED)")


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``dedup-lib explore`` on the day sample, run with the ``dedup_lib`` under test (its
    folder first on PYTHONPATH, which Voilà's kernel inherits)."""
    src = str(Path(dedup_lib.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    port = free_port()
    command = [sys.executable, "-m", "dedup_lib", "explore", SAMPLE, "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--no-browser"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    deadline = time.monotonic() + 180
    while not lines and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert lines, f"no URL printed; stderr: {proc.stderr.read() if proc.poll() else ''}"
        url = re.search(r"http://\S+", lines[0])
        assert url, lines[0]
        yield proc, url.group(0)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


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


def test_the_explorer_page_shows_the_explorer_and_its_controls_work(
    browser: Any, screenshots: Path, server: tuple[subprocess.Popen[str], str]
) -> None:
    proc, url = server
    page = browser.new_page(viewport={"width": 1400, "height": TALL})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url, timeout=READY_MS)
    page.wait_for_selector(".widget-slider, .dedup-explore-error", timeout=READY_MS)
    page.wait_for_function("document.querySelectorAll('table').length > 0", timeout=CHANGE_MS)
    # Voila scrolls inside its own container: a tall viewport shows the whole page
    for width in (1400, 1000):
        page.set_viewport_size({"width": width, "height": TALL})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(screenshots / f"1-loaded-{width}.png"))
    page.set_viewport_size({"width": 1400, "height": TALL})

    assert page.title() == "dedup-lib window explorer"
    body = page.inner_text("body")
    assert "Duplicate detection window explorer" in body
    assert SAMPLE in body
    # no code: Voilà strips the sources, and no cell's input area is drawn
    assert page.locator(".jp-InputArea, .jp-CodeMirrorEditor, .cm-editor").count() == 0
    for code in ("load_telemetry", "WindowExplorer", "import ", "os.environ"):
        assert code not in body
    # no error: no traceback, no stderr block, no error line of the page's own
    assert page.locator(".dedup-explore-error").count() == 0
    assert page.locator('[data-mime-type="application/vnd.jupyter.stderr"]').count() == 0
    assert "Traceback" not in body
    assert "There was an error" not in body
    assert "Error displaying widget" not in body

    # the controls: window slider and text, partitioning, entity, time range
    assert page.locator(".widget-hslider").count() >= 1
    assert page.locator(".widget-text input").count() >= 1
    # "enabled" joins the toggle once its replay, built in the background, is ready
    page.wait_for_function(
        "document.querySelectorAll('.widget-toggle-buttons button').length === 2"
        " && !document.body.innerText.includes('being prepared')",
        timeout=READY_MS,
    )
    assert page.locator(".widget-dropdown select").count() >= 1

    first = _numbers(page)
    assert first

    window = page.locator(".widget-text input").first
    window.fill("PT30S")
    window.press("Enter")
    typed = _wait_for_change(page, first)
    page.screenshot(
        path=str(screenshots / "2-typed-PT30S.png"),
    )
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
    page.screenshot(
        path=str(screenshots / "3-dragged.png"),
    )
    assert dragged != typed
    assert page.locator(".widget-text input").first.input_value() != "30s"

    assert [e for e in errors if not OFFLINE.search(e)] == []
    page.close()

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    assert "stopped" in (proc.stderr.read() if proc.stderr else "")
