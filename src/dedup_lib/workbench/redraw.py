"""Charts that redraw in place: :class:`RedrawnCharts`, one widget showing several plotly charts
that it brings to the state of freshly built figures (``go.Figure`` or
:data:`~dedup_lib.workbench.figures.Spec`) on every change.

Rebuilding a figure in an ``Output`` widget makes the browser tear down and re-create the
plot (most of a second per chart). Here the browser keeps each plot and calls
``Plotly.react`` with the new figure, which redraws only what changed; a chart whose figure
did not change is not touched. One widget holds all the charts because an anywidget ships
its JavaScript with every instance: plotly's own ``FigureWidget`` sends and evaluates the 5 MB
plotly.js bundle once per chart (over a second each in Chromium), this one once. Why it
draws from plain dicts: docs/decisions/explorer-charts.md."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

import anywidget
import numpy as np
import traitlets
from _plotly_utils.utils import to_typed_array_spec

from dedup_lib.workbench.figures import safe

if TYPE_CHECKING:
    from collections.abc import Sequence

    import plotly.graph_objects as go

    from dedup_lib.workbench.figures import Spec

_RENDER = """
const CONFIG = { responsive: true, displaylogo: false };

// plotly.js comes as a trait of its own and is evaluated on the first render, once per page:
// anywidget gives a widget's module 2 s to load before it gives up on the model, and 5 MB of
// plotly.js take longer on a busy machine (the charts then never followed the controls).
const PLOTLY = "__dedupRedrawnChartsPlotly";
const loadPlotly = (model) => {
  if (!window[PLOTLY]) {
    // Its UMD header takes the CommonJS branch, on a module object of its own.
    const text = `const module = { exports: {} };\n${model.get("_plotly")}\n` +
      "export default module.exports;";
    const url = URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
    window[PLOTLY] = import(url)
      .then((loaded) => loaded.default)
      .finally(() => URL.revokeObjectURL(url));
    window[PLOTLY].catch(() => { delete window[PLOTLY]; });  // a later chart tries again
  }
  return window[PLOTLY];
};

// Numeric arrays arrive as typed-array specs ({dtype, bdata}, as plotly writes them). They are
// decoded here, once per trace that changed: plotly would decode them afresh on every redraw,
// and a new array is a changed one to it.
const TYPES = {
  i1: Int8Array, u1: Uint8Array, i2: Int16Array, u2: Uint16Array,
  i4: Int32Array, u4: Uint32Array, f4: Float32Array, f8: Float64Array,
};
const isPlain = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const decoded = (value) => {
  if (Array.isArray(value)) return value.map(decoded);
  if (!isPlain(value)) return value;
  if (typeof value.bdata === "string" && TYPES[value.dtype] && value.shape === undefined) {
    const text = atob(value.bdata);
    const bytes = new Uint8Array(text.length);
    for (let k = 0; k < text.length; k++) bytes[k] = text.charCodeAt(k);
    return new TYPES[value.dtype](bytes.buffer);
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decoded(v)]));
};
// ``value`` with each part equal to the same part of ``old`` replaced by that part of ``old``:
// plotly compares arrays and templates by identity, and replots a chart for a new copy of
// the same template.
const shared = (value, old) => {
  if (old === undefined || value === old) return value;
  if (JSON.stringify(value) === JSON.stringify(old)) return old;
  if (!isPlain(value) || !isPlain(old)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shared(v, old[k])]));
};

async function render({ model, el }) {
  el.classList.add("dedup-live-charts");
  const Plotly = await loadPlotly(model);
  const plots = [];
  // Per chart, what it last drew: the figure's revision, and each trace with its key.
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
      const before = drawn[i];
      if (before && before.revision === figure.revision) return null;
      // A trace the kernel keys as unchanged is given as the object plotly already has, so
      // plotly does not recompute it: a chart where only the window line moved is not
      // replotted, only the line is redrawn.
      const keys = figure.keys || [];
      const data = (figure.data || []).map((trace, j) => {
        const old = before && before.traces[j];
        return old && keys[j] !== undefined && old.key === keys[j] ? old.trace : decoded(trace);
      });
      const layout = shared(decoded(figure.layout || {}), before ? before.layout : undefined);
      const traces = data.map((trace, j) => ({ key: keys[j], trace }));
      drawn[i] = { revision: figure.revision, traces, layout };
      // The config is given once: given again, plotly compares it and measures the page.
      if (before) return Plotly.react(plots[i], data, layout);
      return Plotly.newPlot(plots[i], data, layout, CONFIG);
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
  // plotly's update paths on first use): once idle after the first draw, each chart takes
  // both paths a change takes, so that they are ready before a user acts. It is redrawn from
  // its own figure marked as changed (a whole redraw), then with its lines and labels moved
  // a hair, then as it was (a redraw of the lines and labels only, as a new window makes).
  let warmed = false;
  const nudged = (items) => (items || []).map((item) => {
    const moved = { ...item };
    for (const x of ["x", "x0", "x1"]) if (typeof item[x] === "number") moved[x] = item[x] + 1e-9;
    return moved;
  });
  const warm = () => {
    plots.forEach((plot, i) => {
      const layout = drawn[i] && drawn[i].layout;
      if (!plot.data || !layout) return;
      Plotly.react(plot, plot.data, { ...layout, datarevision: "dedup-warm-" + Date.now() });
      const shapes = nudged(layout.shapes);
      Plotly.react(plot, plot.data, { ...layout, shapes, annotations: nudged(layout.annotations) });
      Plotly.react(plot, plot.data, layout);
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
def _plotly_js() -> str:
    """plotly.js: the copy inside the ``plotly`` package, so no network is needed."""
    return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_text("utf-8")


def to_plotly_json(figure: go.Figure | Spec) -> dict[str, Any]:
    """``figure`` as plotly.js reads it: dates as ISO text, numeric arrays as typed-array specs
    (base64, as plotly writes them). A :data:`~dedup_lib.workbench.figures.Spec` is converted
    without plotly's validation, which is most of the cost of a ``go.Figure``, and its texts
    escaped (:func:`~dedup_lib.workbench.figures.safe`; a ``go.Figure`` made by
    :func:`~dedup_lib.workbench.figures.figure` already is)."""
    data: dict[str, Any] = (
        _plain(safe(figure)) if isinstance(figure, dict) else json.loads(figure.to_json())
    )
    return data


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) if isinstance(v, _NESTED) else v for v in value]
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "M":
            # Times as milliseconds since the epoch, which a date axis reads without parsing.
            ms = value.astype("datetime64[ms]").astype("int64").astype("float64")
            value = np.where(np.isnat(value), np.nan, ms)
        typed = to_typed_array_spec(value)
        return typed if isinstance(typed, dict) else _plain(typed.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


_NESTED = (dict, list, tuple, np.ndarray, np.generic)


class RedrawnCharts(anywidget.AnyWidget):
    """Plotly charts, one below the other, redrawn in place by :meth:`show`. They are
    responsive: each takes its container's width, and follows it when resized."""

    figures = traitlets.List(traitlets.Dict()).tag(sync=True)
    #: plotly.js, which the module evaluates on its first render (not part of the module:
    #: see :data:`_RENDER`).
    _plotly = traitlets.Unicode().tag(sync=True)
    _esm = _RENDER

    def __init__(self, figures: Sequence[go.Figure | Spec] = ()) -> None:
        super().__init__(_plotly=_plotly_js())
        self._revision = 0
        self.show(figures)

    def show(self, figures: Sequence[go.Figure | Spec]) -> None:
        """Show these figures: the browser redraws those that differ from what it shows, in
        one message for all of them. Each trace carries a key that changes only with its
        content, so the browser recomputes only the traces that changed."""
        old = list(self.figures)
        shown = []
        for i, figure in enumerate(figures):
            new = to_plotly_json(figure)
            before = old[i] if i < len(old) else None
            if before is not None and _content(before) == new:
                shown.append(before)
                continue
            self._revision += 1
            shown.append({**new, "revision": self._revision, "keys": self._keys(new, before)})
        if shown != old:
            self.figures = shown

    def _keys(self, new: dict[str, Any], before: dict[str, Any] | None) -> list[int]:
        """A key per trace of ``new``: its key in ``before`` where the trace is the same."""
        old = list(zip(before["data"], before["keys"], strict=True)) if before else []
        keys = []
        for j, trace in enumerate(new.get("data", [])):
            if j < len(old) and old[j][0] == trace:
                keys.append(old[j][1])
            else:
                self._revision += 1
                keys.append(self._revision)
        return keys

    @property
    def shown(self) -> list[dict[str, Any]]:
        """The figures as the browser has them (``data`` and ``layout``)."""
        return [_content(f) for f in self.figures]


def _content(shown: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in shown.items() if k not in ("revision", "keys")}
