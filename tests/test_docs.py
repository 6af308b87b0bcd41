"""The documentation site's sources: the API page lists every public name, neither the README
nor a page links outside the repository, the layout page names every module and each
package's docstring what the package holds (``make docs`` builds the site, warnings as
errors; ``make test`` runs it)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import dedup_lib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "dedup_lib"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_the_api_page_lists_every_public_name() -> None:
    """Every name of ``__all__``, under the package's name, before the finer tools."""
    text = (DOCS / "api.md").read_text()
    public, _, more = text.partition("## More, from the modules that define it")
    listed = re.findall(r"^   dedup_lib\.(\w+)$", public, re.MULTILINE)
    assert sorted(listed) == sorted(n for n in dedup_lib.__all__ if n != "__version__")
    for entry in re.findall(r"^   ~?(dedup_lib\.[\w.]+)$", more, re.MULTILINE):
        module, _, name = entry.rpartition(".")
        assert hasattr(importlib.import_module(module), name), entry
        assert name not in dedup_lib.__all__, f"{entry} is public: list it above"


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


def test_the_layout_page_names_every_module() -> None:
    """docs/development.md's layout lists the package's modules, each once, no other."""
    import pkgutil

    text = (DOCS / "development.md").read_text()
    listed = re.findall(r"^   (dedup_lib[\w.]*)$", text, re.MULTILINE)
    modules = [
        m.name
        for m in pkgutil.walk_packages(dedup_lib.__path__, "dedup_lib.")
        if ".resources" not in m.name and m.name != "dedup_lib.__main__"
    ]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(modules)


def _named(doc: str, package: str, held: list[str]) -> tuple[set[str], list[str]]:
    """What of ``held`` (the package's modules and subpackages) ``doc`` names, each by a
    ``:mod:`` role (its full name, or ``.name``) or as a literal of its name alone; and the
    modules it names by a ``:mod:`` role that do not exist."""
    named, unknown = set(), []
    for ref in re.findall(r":mod:`~?([\w.]+)`", doc):
        full = package + ref if ref.startswith(".") else ref
        try:
            found = importlib.util.find_spec(full)
        except ModuleNotFoundError:
            found = None
        if found is None:
            unknown.append(ref)
        elif full.startswith(f"{package}."):
            named.add(full.removeprefix(f"{package}.").split(".")[0])
    named |= {name for name in re.findall(r"``(\w+)``", doc) if name in held}
    return named, unknown


def test_each_package_docstring_names_what_the_package_holds() -> None:
    """Each subpackage's ``__init__`` docstring names every module and subpackage it holds,
    and no module that is not there."""
    wrong = []
    for init in sorted(SRC.rglob("__init__.py")):
        folder = init.parent
        if folder == SRC or "resources" in folder.parts:
            continue
        package = ".".join(("dedup_lib", *folder.relative_to(SRC).parts))
        held = [p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
        held += [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
        named, unknown = _named(ast.get_docstring(ast.parse(init.read_text())) or "", package, held)
        wrong += [
            f"{package}'s docstring does not name {name}" for name in held if name not in named
        ]
        wrong += [f"{package}'s docstring names {ref}, which does not exist" for ref in unknown]
    assert wrong == []
