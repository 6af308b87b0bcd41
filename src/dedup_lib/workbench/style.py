"""One style for every table the notebooks show.

:func:`styled` turns a pandas table into a Styler that renders as a rich HTML table in
JupyterLab, VS Code and the postmortem's HTML report: counts with thousands separators,
``share_*`` columns as percentages, durations in seconds as ``10m`` or ``11h50m41s``, times
to the second, no index. Every other value, and every column label, is data drawn as text
(:func:`dedup_lib.text.escape`): markup in a MessageId or an entity name shows as its
characters. The table itself is not changed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import pandas as pd
from pandas.api import types
from pandas.io.formats.style import Styler

if TYPE_CHECKING:
    from pandas.io.formats.style_render import CSSDict

from dedup_lib.rules.durations import format_duration
from dedup_lib.text import escape

__all__ = ["is_duration", "styled", "widget_html"]

MISSING = "—"
"""Shown for a missing value (NaN, None, NaT)."""

DURATION_NAMES = frozenset({"delay", "caught_from", "window", "median_delay"})
"""Columns in seconds that do not end in ``_s`` (see :func:`is_duration`)."""


def is_duration(name: object) -> bool:
    """Whether a column holds seconds: ``window_s``, ``delay_s``, ``delay``,
    ``caught_from``, ``longest_caught_from``, ``median_delay`` and the like."""
    text = str(name)
    return (
        text.endswith("_s") or text in DURATION_NAMES or text.endswith(("_delay", "_caught_from"))
    )


def _missing(value: Any) -> bool:
    return value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _duration(value: Any) -> str:
    return MISSING if _missing(value) else format_duration(float(value))


def _share(value: Any) -> str:
    return MISSING if _missing(value) else f"{float(value):.1%}"


def _count(value: Any) -> str:
    return MISSING if _missing(value) else f"{round(float(value)):,}"


def _number(value: Any) -> str:
    if _missing(value):
        return MISSING
    number = float(value)
    return f"{round(number):,}" if number.is_integer() else f"{number:,.2f}"


def _time(value: Any) -> str:
    return MISSING if _missing(value) else pd.Timestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def _text(value: Any) -> str:
    return MISSING if _missing(value) else escape(value, "html")


#: An underscore between two parts of a label of three characters or more (``share_caught``,
#: not ``window_s``), in its escaped text: where the label may wrap.
_BREAK = re.compile(r"(?<=[^_]{3})_(?=[^_]{3})")


def _label(value: Any) -> str:
    """A column's label as text that may wrap after its underscores: a ``<wbr>`` element put in
    the escaped text, which holds no markup of its own; a copy of the label leaves the element
    out (a zero-width space would go with it, and the name copied into code would not be the
    column's)."""
    return _BREAK.sub("_<wbr>", _text(value))


def _formatter(name: object, column: pd.Series[Any]) -> Callable[[Any], str]:
    if str(name).startswith("share_"):
        return _share
    if is_duration(name) and types.is_numeric_dtype(column) and not types.is_bool_dtype(column):
        return _duration
    if types.is_bool_dtype(column):
        return _text
    if types.is_integer_dtype(column):
        return _count
    if types.is_float_dtype(column):
        whole = column.dropna()
        return _count if len(whole) and bool((whole == whole.round()).all()) else _number
    if types.is_datetime64_any_dtype(column):
        return _time
    return _text


def styled(table: pd.DataFrame) -> Styler:
    """A table styled for reading in a notebook, as the last expression of a cell.

    Integer counts (and float columns of whole numbers): ``199,839``; columns named
    ``share_*``: percentages with one decimal, ``6.6%``; durations in seconds
    (:func:`is_duration`): ``20s``, ``10m``, ``11h50m41s``, ``250ms`` below a second; other
    floats: two decimals; times: to the second; missing values: ``—``; anything else
    (names, ids, causes) and the column labels as text, never as markup; a label may wrap
    after its underscores. The index is hidden (the tables of ``dedup_lib`` carry their keys
    as columns).

    Parameters
    ----------
    table : pandas.DataFrame
        A table of the library's (:func:`dedup_lib.summarize`, ...).

    Returns
    -------
    pandas.io.formats.style.Styler

    Examples
    --------
    The cells of the HTML a notebook shows:

    >>> import re
    >>> import pandas as pd
    >>> from dedup_lib import styled
    >>> table = pd.DataFrame({"entity": ["<b>orders</b>"], "sends": [199839],
    ...                       "share_caught": [0.066], "delay_s": [42650.5]})
    >>> re.findall('class="data [^"]*" >([^<]*)<', styled(table).to_html())
    ['&lt;b&gt;orders&lt;/b&gt;', '199,839', '6.6%', '11h50m50s']
    """
    formatters: dict[Hashable, str | Callable[[object], str] | None] = {}
    numeric: list[Hashable] = []
    for name in table.columns:
        formatters[name] = _formatter(name, table[name])
        if formatters[name] not in (_time, _text):
            numeric.append(name)
    styler = table.style.format(formatters, na_rep=MISSING)
    styler = styler.format_index(_text, axis=0, level=None)
    styler = styler.format_index(_label, axis=1, level=None)
    # Jupyter right-aligns every cell: numbers stay so, text (names, causes) reads from the left,
    # wrapping between words. A column with a word too long for a line (an id of 10 kB) wraps
    # anywhere instead of widening the table past the page; only such a column, since wrapping
    # anywhere lets the browser squeeze a column to a few letters a line ("resen" over "d")
    # beside a long one. A label wraps after its underscores (_label), so a narrow column of
    # counts is not as wide as its name.
    text: list[Hashable] = [name for name in table.columns if name not in numeric]
    if numeric:
        styler = styler.set_properties(subset=numeric, **{"text-align": "right"})
    if text:
        styler = styler.set_properties(subset=text, **{"text-align": "left"})
    if unbroken := [name for name in text if _longest_word(table[name]) > _WORD]:
        wrap = {"overflow-wrap": "anywhere", "max-width": "40em"}
        styler = styler.set_properties(subset=unbroken, **wrap)
    # A column's label aligned as its cells (Jupyter right-aligns every label).
    left = set(text)
    styler = styler.map_index(
        lambda label: f"text-align: {'left' if label in left else 'right'}", axis="columns"
    )
    return styler.hide(axis="index")


#: The longest word (in characters) a column may hold and still wrap only between words.
_WORD = 40


def _longest_word(column: pd.Series) -> int:
    """The characters of the longest word (between spaces) of a value of ``column``."""
    if pd.api.types.is_datetime64_any_dtype(column) or not column.notna().any():
        return 0
    words = column.dropna().astype(str).str.split().explode()
    return int(words.str.len().max()) if words.notna().any() else 0


_WIDGET_TABLE: list[CSSDict] = [
    {"selector": "", "props": "border-collapse: collapse; font-size: 13px; margin: 4px 0;"},
    {"selector": "th, td", "props": "padding: 2px 10px; border-bottom: 1px solid #ddd;"},
    {"selector": "caption", "props": "caption-side: top; text-align: left; padding: 12px 0 4px;"},
]


def widget_html(table: pd.DataFrame, caption: str | None = None) -> str:
    """A :func:`styled` table as HTML for an ``ipywidgets.HTML``, whose value is replaced
    without a flicker; ``caption`` is markup, never built from data."""
    shown = styled(table).set_table_styles(_WIDGET_TABLE)
    return (shown.set_caption(caption) if caption else shown).to_html()
