"""Data drawn as text: ``escape`` for each surface, ``shown`` for what a person sees."""

from __future__ import annotations

import html
from html.parser import HTMLParser

import mistune
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dedup_lib import escape
from dedup_lib.text import LIMIT, shown
from hostile_kit import BREAKOUT, IMG, LINK, LONG, RTL, SCRIPT, SVG

HOSTILE = [SCRIPT, IMG, SVG, LINK, BREAKOUT, RTL, LONG, "a & b", "$x$ *y* `z` [l](u) # h"]


class _Tags(HTMLParser):
    """The start tags of a fragment, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parsed(fragment: str) -> _Tags:
    parser = _Tags()
    parser.feed(fragment)
    parser.close()
    return parser


def test_shown_makes_invisible_characters_visible_and_cuts_long_values():
    assert shown("\u202egnp.exe") == "\\u202egnp.exe"
    assert shown("a\x1b[2Jb\nc") == "a\\x1b[2Jb\\x0ac"
    assert shown("x" * LIMIT) == "x" * LIMIT
    assert shown(LONG) == "L" * LIMIT + "…(10,240 characters)"
    assert shown(42) == "42"


@pytest.mark.parametrize("value", HOSTILE)
def test_html_is_text_in_an_element_and_in_an_attribute(value):
    escaped = escape(value)
    inside = _parsed(f"<td>{escaped}</td>")
    assert inside.tags == ["td"]
    assert "".join(inside.text) == shown(value)
    attribute = _parsed(f'<td title="{escaped}">x</td>')
    assert attribute.tags == ["td"]
    assert "".join(attribute.text) == "x"


@pytest.mark.parametrize("value", HOSTILE)
def test_markdown_is_text_in_a_sentence(value):
    rendered = mistune.html(f"On {escape(value, 'markdown')} at noon.")
    parsed = _parsed(rendered)
    assert parsed.tags == ["p"], rendered
    assert "".join(parsed.text).strip() == f"On {shown(value)} at noon."


@pytest.mark.parametrize("value", HOSTILE)
def test_plotly_reads_no_tag_and_decodes_what_it_shows(value):
    escaped = escape(value, "plotly")
    assert "<" not in escaped
    assert ">" not in escaped
    assert "&quot;" not in escaped  # plotly.js does not decode it: it would show
    # plotly.js decodes &amp; &lt; &gt; (and numeric entities): what it draws is the value
    assert escaped.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == shown(value)


def test_text_for_a_terminal_is_shown():
    assert escape("\x1b]0;pwned\x07", "text") == "\\x1b]0;pwned\\x07"
    assert escape(SCRIPT, "text") == SCRIPT


def test_prose_is_not_cut():
    prose = "The broker kept " + "x" * 400 + "."
    assert escape(prose, "markdown", limit=None).endswith("x\\.")
    assert "characters)" not in escape(prose, "html", limit=None)


def test_an_unknown_surface_is_refused():
    with pytest.raises(ValueError, match="unknown surface 'svg'"):
        escape("x", "svg")  # type: ignore[arg-type]


@given(st.text(max_size=300))
def test_any_text_stays_text_in_html(value):
    parsed = _parsed(f"<td>{escape(value)}</td>")
    assert parsed.tags == ["td"]
    assert html.unescape(escape(value)) == shown(value)


@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=80))
def test_any_text_stays_one_paragraph_of_text_in_markdown(value):
    rendered = mistune.html(f"On {escape(value, 'markdown')} at noon.")
    parsed = _parsed(rendered)
    assert parsed.tags == ["p"], rendered
    assert "".join(parsed.text).strip() == f"On {shown(value)} at noon.".strip()
