"""The house style's figures: every text escaped but the templates, and what a shown figure
tells the report's policy."""

from __future__ import annotations

import plotly.graph_objects as go

from dedup_lib.workbench import csp, figures


def test_safe_escapes_every_text_but_the_templates():
    spec = {
        "data": [{"name": "<b>x</b>", "hovertemplate": "%{y}<br>%{meta}", "meta": "<i>"}],
        "layout": {"title": {"text": "a < b & c"}, "annotations": [{"text": "<a href=x>"}]},
    }
    safe = figures.safe(spec)
    assert safe["data"][0] == {
        "name": "&lt;b&gt;x&lt;/b&gt;", "hovertemplate": "%{y}<br>%{meta}", "meta": "&lt;i&gt;",
    }  # fmt: skip
    assert safe["layout"]["title"]["text"] == "a &lt; b &amp; c"
    assert safe["layout"]["annotations"][0]["text"] == "&lt;a href=x&gt;"
    assert spec["data"][0]["name"] == "<b>x</b>"  # a copy: the spec is not changed


def test_a_chart_names_its_scripts_for_the_policy():
    from IPython.core.interactiveshell import InteractiveShell

    shown: list[tuple[object, dict]] = []
    shell = InteractiveShell.instance()
    publish = shell.display_pub.publish
    shell.display_pub.publish = lambda data, metadata=None, **kw: shown.append((data, metadata))
    try:
        figures.show(go.Figure(go.Bar(y=[1])), embed=True)
    finally:
        shell.display_pub.publish = publish
    data, metadata = shown[-1]
    html = data["text/html"]
    assert metadata["dedup_lib"]["scripts"] == csp.script_hashes(html)
    assert len(csp.script_hashes(html)) >= 1


def test_a_line_break_is_plotlys_and_the_only_tag():
    assert figures.safe({"text": "one <b>\ntwo"}) == {"text": "one &lt;b&gt;<br>two"}


def test_figure_escapes_a_go_figure_too_and_keeps_its_arrays():
    made = figures.figure(go.Figure(go.Bar(y=[1, 2], name="<svg onload=alert(1)>")))
    assert made.data[0].name == "&lt;svg onload=alert(1)&gt;"
    assert list(made.data[0].y) == [1, 2]
