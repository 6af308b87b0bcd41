"""The documentation site's sources: the API page lists every public name, and neither the
README nor a page links outside the repository (``make docs`` builds the site, warnings as
errors; ``make test`` runs it)."""

from __future__ import annotations

import re
from pathlib import Path

import dedup_lib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_the_api_page_lists_every_public_name() -> None:
    listed = re.findall(r"^   dedup_lib\.([\w.]+)$", (DOCS / "api.md").read_text(), re.MULTILINE)
    names = [entry.rsplit(".", 1)[-1] for entry in listed]
    assert sorted(names) == sorted(n for n in dedup_lib.__all__ if n != "__version__")
    for entry in listed:  # each entry names the object the package exports
        module, _, name = f"dedup_lib.{entry}".rpartition(".")
        assert getattr(__import__(module, fromlist=[name]), name) is getattr(dedup_lib, name)


def test_no_page_links_outside_the_repository() -> None:
    for page in _pages():
        text = page.read_text()
        assert "../shared" not in text, page
        assert "/work/" not in text, page
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{page.name} links {target}"
            assert resolved.exists(), f"{page.name} links {target}, which does not exist"
