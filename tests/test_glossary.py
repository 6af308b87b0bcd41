"""The glossary is held: no word it replaces is used in ``src/``, ``docs/`` or ``notebooks/``.

Each entry of ``docs/glossary.md`` may end with a ``Replaces:`` line naming, in backticks,
the words used before for its concept; a word followed by ``(in `path`)`` is replaced only
under that path. The section "Where a replaced word stays" lists the files allowed to keep
one (an alias kept for a release, the changelog), each with its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "docs" / "glossary.md"
#: Where the glossary's words are held: the library, the docs, the notebooks' paired scripts.
SCANNED = ("src", "docs", "notebooks")
#: Files the scan reads, by suffix.
SUFFIXES = {".py", ".md", ".java", ".yml", ".yaml", ".json", ".html", ".txt", ".toml", ".rst"}
#: What is not the house's own words: generated pages, the notebooks' .ipynb twins (their
#: .py pair is scanned), the glossary itself, which names the old words.
SKIPPED = ("docs/generated/", "docs/glossary.md")

_ENTRY = re.compile(r"^(?P<term>[^\s:#][^\n]*)\n(?P<body>(?::|  ).*(?:\n(?:  ).*)*)", re.M)
_REPLACES = re.compile(r"Replaces:(?P<words>.*?)(?:\.\s*$|\Z)", re.S)
_WORD = re.compile(r"`(?P<word>[^`]+)`(?:\s*\(in `(?P<scope>[^`]+)`\))?")
_KEPT = re.compile(r"^- `(?P<path>[^`]+)`: `(?P<word>[^`]+)`", re.M)


@dataclass(frozen=True)
class Replaced:
    """A word the glossary's ``term`` replaces, under ``scope`` (a path prefix) or anywhere."""

    term: str
    word: str
    scope: str = ""

    def pattern(self) -> re.Pattern[str]:
        """An identifier matches whole and case-sensitive; a phrase, whole words in any case
        and spacing (a line break inside it too)."""
        if re.fullmatch(r"[\w.]+", self.word) and not re.fullmatch(r"[a-z]+", self.word):
            return re.compile(rf"(?<!\w){re.escape(self.word)}(?!\w)")
        words = r"\s+".join(re.escape(w) for w in self.word.split())
        return re.compile(rf"\b{words}\b", re.IGNORECASE)


def replaced_words(glossary: str) -> list[Replaced]:
    """Every word the glossary's entries replace."""
    found = []
    for entry in _ENTRY.finditer(glossary):
        replaces = _REPLACES.search(entry["body"])
        if replaces is None:
            continue
        for word in _WORD.finditer(replaces["words"]):
            found.append(Replaced(entry["term"].strip(), word["word"], word["scope"] or ""))
    return found


def kept_uses(glossary: str) -> set[tuple[str, str]]:
    """The (path, word) pairs the glossary allows, from its "Where a replaced word stays"."""
    section = glossary.split("## Where a replaced word stays", 1)
    return (
        {(m["path"], m["word"]) for m in _KEPT.finditer(section[1])} if len(section) > 1 else set()
    )


def uses(root: Path, replaced: list[Replaced], kept: set[tuple[str, str]]) -> list[str]:
    """Each use of a replaced word under ``root``'s scanned folders, as ``path:line: word
    (glossary: term)``."""
    found = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.suffix not in SUFFIXES or not path.is_file() or relative.startswith(SKIPPED):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for word in replaced:
                if not relative.startswith(word.scope) or (relative, word.word) in kept:
                    continue
                for hit in word.pattern().finditer(text):
                    line = text.count("\n", 0, hit.start()) + 1
                    found.append(f"{relative}:{line}: {hit[0]!r} (glossary: {word.term})")
    return found


def test_the_glossary_names_what_its_words_replace() -> None:
    replaced = replaced_words(GLOSSARY.read_text(encoding="utf-8"))
    terms = {r.term for r in replaced}
    assert len(replaced) >= 15, replaced
    for term in ("repeated sends", "without MessageId", "window", "kept message", "judge"):
        assert term in terms, f"the glossary's {term!r} names no word it replaces: {terms}"


def test_no_replaced_word_is_used() -> None:
    glossary = GLOSSARY.read_text(encoding="utf-8")
    found = uses(ROOT, replaced_words(glossary), kept_uses(glossary))
    assert not found, "words the glossary replaces:\n" + "\n".join(found)


def test_each_kept_use_is_still_there() -> None:
    """An exception the code no longer needs is taken out of the glossary."""
    glossary = GLOSSARY.read_text(encoding="utf-8")
    for path, word in kept_uses(glossary):
        assert (ROOT / path).is_file(), f"the glossary keeps {word!r} in {path}, which is gone"
        assert word in (ROOT / path).read_text(encoding="utf-8"), f"{path} no longer says {word!r}"


GLOSSARY_OF_TWO = """# Glossary

repeated sends
: The sends of keys sent more than once. Replaces: `held sends`, `HeldMessages`,
  `segment` (in `src/sweep/`).

## Where a replaced word stays

- `src/alias.py`: `HeldMessages`, kept for a release.
"""


@pytest.mark.parametrize(
    ("path", "text", "caught"),
    [
        ("src/a.py", "class HeldMessages:\n", True),
        ("docs/guide.md", "the cache's\nHeld  sends are", True),
        ("notebooks/01.py", "# held sends\n", True),
        ("src/a.py", "UnheldMessages = HeldMessagesX = 1\n", False),
        ("src/alias.py", "HeldMessages = RepeatedMessages\n", False),
        ("src/sweep/a.py", 'frame["segment"]\n', True),
        ("src/live/a.py", 'frame["segment"]\n', False),
        ("docs/generated/x.rst", "HeldMessages\n", False),
        ("tests/test_a.py", "HeldMessages\n", False),
    ],
)
def test_a_planted_use_fails_the_check(tmp_path: Path, path: str, text: str, caught: bool) -> None:
    planted = tmp_path / path
    planted.parent.mkdir(parents=True)
    planted.write_text(text)
    found = uses(tmp_path, replaced_words(GLOSSARY_OF_TWO), kept_uses(GLOSSARY_OF_TWO))
    assert bool(found) == caught, found
    if caught:
        assert found[0].startswith(f"{path}:")
        assert "(glossary: repeated sends)" in found[0]
