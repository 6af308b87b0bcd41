"""Section: a notebook section's parts, displayed in order as a cell's output."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from IPython.core.interactiveshell import InteractiveShell

from dedup_lib.workbench.section import Section


def _shown(section: Section) -> list[tuple[dict, dict | None]]:
    shown: list[tuple[dict, dict | None]] = []
    shell = InteractiveShell.instance()
    publish = shell.display_pub.publish
    shell.display_pub.publish = lambda data, metadata=None, **kw: shown.append((data, metadata))
    try:
        section._ipython_display_()
    finally:
        shell.display_pub.publish = publish
    return shown


def test_parts_are_shown_in_order_as_markdown_styled_tables_and_charts():
    table = pd.DataFrame({"entity": ["<b>q</b>"], "sends": [1200]})
    section = Section.of("First **this**.", None, table, go.Figure(go.Bar(y=[1])))
    assert repr(section) == "Section(sentence, table, chart)"
    shown = _shown(section)
    assert shown[0][0]["text/markdown"] == "First **this**."
    assert "1,200" in shown[1][0]["text/html"]  # the house style
    assert "&lt;b&gt;q&lt;/b&gt;" in shown[1][0]["text/html"]  # data as text
    assert {"application/vnd.plotly.v1+json", "text/html"} & set(shown[-1][0])  # the chart
    assert section.sentences == ["First **this**."]
    assert section.tables == [table]
    assert len(section.figures) == 1


def test_metadata_goes_with_each_part_and_embedding_inlines_the_charts():
    section = Section(("# Title",), metadata={"dedup_lib": {"title": "Title"}})
    assert _shown(section)[0][1] == {"dedup_lib": {"title": "Title"}}
    embedded = Section.of(go.Figure(go.Bar(y=[1]))).embedded()
    (chart,) = _shown(embedded)
    assert "text/html" in chart[0]
    assert chart[1]["dedup_lib"]["scripts"]  # its scripts' hashes, for the report's policy
