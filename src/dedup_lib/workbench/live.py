"""Charts that redraw in place: :class:`LiveCharts`, one widget showing several plotly charts
that it brings to the state of freshly built ``go.Figure`` objects on every change.

Rebuilding a figure in an ``Output`` widget makes the browser tear down and re-create the
plot (most of a second per chart). Here the browser keeps each plot and calls
``Plotly.react`` with the new figure, which redraws only what changed; a chart whose figure
did not change is not touched. One widget holds all the charts because an anywidget ships
its JavaScript with every instance: plotly's own ``FigureWidget`` sends and evaluates the 5 MB
plotly.js bundle once per chart (over a second each in Chromium), this one once."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

if TYPE_CHECKING:
    from collections.abc import Sequence

    import plotly.graph_objects as go

_RENDER = """
const Plotly = module.exports;
const CONFIG = { responsive: true, displaylogo: false };

function render({ model, el }) {
  el.classList.add("dedup-live-charts");
  const plots = [];
  const drawn = [];
  const draw = () => {
    performance.mark("dedup-live-charts:received");
    const figures = model.get("figures");
    while (plots.length > figures.length) {
      const plot = plots.pop();
      drawn.pop();
      Plotly.purge(plot);
      plot.remove();
    }
    const pending = figures.map((figure, i) => {
      if (!plots[i]) {
        const plot = document.createElement("div");
        plot.style.contain = "layout paint style";
        el.appendChild(plot);
        plots.push(plot);
        drawn.push(null);
      }
      if (drawn[i] === figure.revision) return null;
      drawn[i] = figure.revision;
      return Plotly.react(plots[i], figure.data || [], figure.layout || {}, CONFIG);
    });
    Promise.all(pending).then(() => {
      performance.mark("dedup-live-charts:drawn");
      if (!warmed) {
        warmed = true;
        (window.requestIdleCallback || setTimeout)(warm);
      }
    });
  };
  // The first change redrew in twice the time of the later ones (the browser compiling
  // plotly's update path on first use): once idle after the first draw, each chart is
  // redrawn from its own figure, marked as changed, so that path is ready before a user acts.
  let warmed = false;
  const warm = () => {
    plots.forEach((plot) => {
      if (!plot.data || !plot.layout) return;
      const layout = { ...plot.layout, datarevision: "dedup-warm-" + Date.now() };
      Plotly.react(plot, plot.data, layout, CONFIG);
    });
  };
  // The output area may be laid out after the first draw, or resized with the panel.
  let width = null;
  const resized = new ResizeObserver(() => {
    if (!el.offsetWidth || el.offsetWidth === width) return;
    width = el.offsetWidth;
    for (const plot of plots) Plotly.Plots.resize(plot);
  });
  resized.observe(el);
  model.on("change:figures", draw);
  draw();
  return () => {
    resized.disconnect();
    model.off("change:figures", draw);
    plots.forEach((plot) => Plotly.purge(plot));
  };
}

export default { render };
"""


@functools.cache
def _module() -> str:
    """plotly.js (the copy inside the ``plotly`` package, so no network is needed) as an ES
    module that renders the charts. Its UMD header takes the CommonJS branch."""
    bundle = resources.files("plotly").joinpath("package_data", "plotly.min.js").read_text("utf-8")
    return f"const module = {{ exports: {{}} }};\n{bundle}\n{_RENDER}"


def plain(figure: go.Figure) -> dict[str, Any]:
    """``figure`` as plotly.js reads it: dates as ISO text, numbers as typed-array specs."""
    data: dict[str, Any] = json.loads(figure.to_json())
    return data


class LiveCharts(anywidget.AnyWidget):
    """Plotly charts, one below the other, redrawn in place by :meth:`show`. They are
    responsive: each takes its container's width, and follows it when resized."""

    figures = traitlets.List(traitlets.Dict()).tag(sync=True)

    @property
    def _esm(self) -> str:
        return _module()

    def __init__(self, figures: Sequence[go.Figure] = ()) -> None:
        super().__init__()
        self._revision = 0
        self.show(figures)

    def show(self, figures: Sequence[go.Figure]) -> None:
        """Show these figures: the browser redraws those that differ from what it shows, in
        one message for all of them."""
        old = {i: f for i, f in enumerate(self.figures)}
        shown = []
        for i, figure in enumerate(figures):
            new = plain(figure)
            before = old.get(i)
            if before is not None and _content(before) == new:
                shown.append(before)
                continue
            self._revision += 1
            shown.append({**new, "revision": self._revision})
        if shown != list(self.figures):
            self.figures = shown

    @property
    def shown(self) -> list[dict[str, Any]]:
        """The figures as the browser has them (``data`` and ``layout``)."""
        return [_content(f) for f in self.figures]


def _content(shown: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in shown.items() if k != "revision"}
