"""Data drawn as text, on every surface: the one place that makes a value from the data (a
MessageId, an entity name, a file name) safe to show in HTML, markdown, a plotly chart or a
terminal.

Any application allowed to send to a queue chooses its MessageIds, so the data is text an
attacker can write: markup in it must show as its characters, never become an element of the
page. Every surface that draws data goes through :func:`escape` (tables through
:func:`dedup_lib.styled`, charts through :mod:`dedup_lib.workbench.charts`, the explorer's
widgets, the report, the command line), so a new table or chart cannot forget it.
"""

from __future__ import annotations

import html
from typing import Literal

from dedup_lib.errors import printable

__all__ = ["LIMIT", "SHORT", "Surface", "escape", "shown"]

#: The longest value shown whole: 260 characters, the longest entity name the service allows
#: (a MessageId, partition key or session id has at most 128). Longer values are cut, saying
#: how long they were.
LIMIT = 260
#: The longest value shown whole where it shares a line with other things: a chart's legend
#: entry or title, a control's list of choices. Longer than most entity names and ids, short
#: enough to leave the chart its width.
SHORT = 48

#: Where a value is drawn: HTML (tables, widgets, pages), markdown (a notebook's or a report's
#: prose), plotly (titles, legends, hover texts, annotations: plotly.js reads a subset of
#: HTML there) or plain text (a terminal, a page's title, a widget's label).
Surface = Literal["html", "markdown", "plotly", "text"]

#: Markdown's own characters: ASCII punctuation, each of which a backslash makes literal.
_MARKDOWN = frozenset("\\`*_{}[]()#+-.!|~$:;,?/=%@^")
#: What HTML reads as markup, as entities (in markdown as well: it passes HTML through).
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"}


def shown(value: object, limit: int = LIMIT) -> str:
    """``value`` as a person should see it: its text, with control, bidirectional and other
    invisible characters written as escapes (``\\u202e``, so a right-to-left override can
    neither reorder nor hide what is around it), and over ``limit`` characters cut, with its
    length (``…(10,240 characters)``)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        return f"{printable(text[:limit])}…({len(text):,} characters)"
    return printable(text)


def escape(value: object, into: Surface = "html", *, limit: int | None = LIMIT) -> str:
    """A value drawn as text on a surface: never read as markup there.

    The value is first made printable and cut (:func:`shown`), then escaped for the surface.

    Parameters
    ----------
    value : object
        Data, or prose holding data (never markup): a MessageId, an entity name, a file name.
    into : {"html", "markdown", "plotly", "text"}, default "html"
        ``html``: ``& < > " '`` as entities, text in an element or an attribute;
        ``markdown``: those as entities too, and markdown's punctuation (``* _ ` [ ] $ #``
        ...) backslashed, so it neither formats, links, nor starts math; ``plotly``:
        ``& < >`` as entities (plotly.js decodes those, not ``&quot;``), so no tag of
        plotly's subset (``<a href>``, ``<b>``, ``<br>``) is read; ``text``: printable only,
        so no escape sequence reaches a terminal.
    limit : int or None, default :data:`LIMIT`
        Characters kept, the rest cut with an ellipsis; ``None``: never cut (prose).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        An unknown surface.

    Examples
    --------
    >>> from dedup_lib import escape
    >>> escape('<b onclick="x">orders</b>')
    '&lt;b onclick=&quot;x&quot;&gt;orders&lt;/b&gt;'
    >>> print(escape("*orders* [link](x)", "markdown"))
    \\*orders\\* \\[link\\]\\(x\\)
    >>> print(escape("\\x1b]0;title\\x07orders", "text"))
    \\x1b]0;title\\x07orders
    """
    text = shown(value, limit) if limit is not None else printable(str(value))
    if into == "html":
        return html.escape(text, quote=True)
    if into == "plotly":
        return html.escape(text, quote=False)
    if into == "markdown":
        return "".join(_ENTITIES.get(c) or (f"\\{c}" if c in _MARKDOWN else c) for c in text)
    if into == "text":
        return text
    raise ValueError(f"escape: unknown surface {into!r}; expected html, markdown, plotly, text")
