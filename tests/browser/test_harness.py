"""The browser fixture itself: a page renders and a screenshot lands where CI keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_chromium_renders_a_page(browser: Any, screenshots: Path) -> None:
    page = browser.new_page()
    page.set_content("<h1>dedup-lib</h1>")
    page.screenshot(path=str(screenshots / "page.png"))
    assert page.inner_text("h1") == "dedup-lib"
    assert (screenshots / "page.png").stat().st_size > 0
    page.close()
