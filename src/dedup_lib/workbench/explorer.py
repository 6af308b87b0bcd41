"""``WindowExplorer``: the window, partitioning, entity and time-range controls and the charts
they drive. Spark runs once, when the explorer is built (one :class:`ReplayCache` per
partitioning mode); every control change is answered from the caches in memory."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd
from IPython.display import display

from dedup_lib.analysis.selection import narrow
from dedup_lib.analysis.tables import ALL_ENTITIES
from dedup_lib.errors import InputError
from dedup_lib.rules.durations import format_duration, format_window, parse_window
from dedup_lib.rules.policy import WINDOW_BOUNDS, DedupPolicy
from dedup_lib.sweep.views import ReplayCache
from dedup_lib.workbench import charts

if TYPE_CHECKING:
    from collections.abc import Sequence

    import plotly.graph_objects as go
    from pyspark.sql import DataFrame

MIN_WINDOW_S, MAX_WINDOW_S = (b.total_seconds() for b in WINDOW_BOUNDS["service"][:2])
MODES = {"disabled": False, "enabled": True}


@dataclass(frozen=True)
class View:
    """What the explorer shows for one setting of its controls."""

    window_s: float
    partitioning: bool
    entity: str
    time_range: tuple[pd.Timestamp, pd.Timestamp] | None
    numbers: pd.DataFrame
    top_keys: pd.DataFrame
    sends_over_time: go.Figure
    resend_delays: go.Figure
    ids_held: go.Figure


class WindowExplorer:
    """Controls and charts for choosing a duplicate-detection window.

    ``update(...)`` computes a :class:`View` from the caches (no Spark job) and redraws;
    the widgets call it on every change. Display the explorer with ``explorer.widget``."""

    def __init__(
        self,
        caches: dict[bool, ReplayCache],
        window: timedelta | float | str = "PT10M",
        partitioning: bool = False,
    ) -> None:
        if partitioning not in caches:
            raise InputError(f"WindowExplorer: no cache for partitioning={partitioning}")
        self.caches = caches
        first = next(iter(caches.values()))
        entities = sorted(
            {str(e) for c in caches.values() for e in c.summary(60).entity} - {ALL_ENTITIES}
        )
        self.entities = [ALL_ENTITIES, *entities]
        times = first.over_time(60)["time"]
        self.times = sorted(times.unique()) if len(times) else []
        seconds = parse_window(window).total_seconds()

        self.window_slider = widgets.FloatLogSlider(
            value=seconds, base=10, min=math.log10(MIN_WINDOW_S), max=math.log10(MAX_WINDOW_S),
            step=0.01, description="window", readout=False, continuous_update=False,
            layout=widgets.Layout(width="420px"),
        )  # fmt: skip
        self.window_text = widgets.Text(
            value=format_window(parse_window(seconds)),
            description="or type",
            placeholder="PT10M, 10m, 90s, 0:10:00",
            continuous_update=False,
            layout=widgets.Layout(width="220px"),
        )
        self.mode = widgets.ToggleButtons(
            options=[m for m, on in MODES.items() if on in caches],
            value="enabled" if partitioning else "disabled",
            description="partitioning",
        )
        self.entity = widgets.Dropdown(
            options=self.entities, value=ALL_ENTITIES, description="entity"
        )
        options = _range_options(self.times)
        self.time_range = widgets.SelectionRangeSlider(
            options=options, index=(0, max(0, len(options) - 1)), description="time (UTC)",
            continuous_update=False, layout=widgets.Layout(width="640px"),
        ) if options else None  # fmt: skip
        self.message = widgets.HTML()
        self.numbers = widgets.Output()
        self.charts = [widgets.Output() for _ in range(3)]
        self.keys = widgets.Output()
        self._syncing = False
        # The first view computes what every later change reuses (resend delays, key
        # numbering), so control changes answer from memory.
        self.view: View | None = self._view(seconds, partitioning, ALL_ENTITIES, None)

        for control in (self.window_slider, self.mode, self.entity, self.time_range):
            if control is not None:
                control.observe(self._on_change, names="value")
        self.window_text.observe(self._on_text, names="value")
        controls = [
            widgets.HBox([self.window_slider, self.window_text]),
            widgets.HBox([self.mode, self.entity]),
        ]
        if self.time_range is not None:
            controls.append(self.time_range)
        self.widget = widgets.VBox([*controls, self.message, self.numbers, *self.charts, self.keys])

    @classmethod
    def from_frame(
        cls,
        df: DataFrame,
        window: timedelta | float | str = "PT10M",
        partitioning: bool = False,
        modes: Sequence[bool] = (False, True),
    ) -> WindowExplorer:
        """Build the caches (one Spark pass per partitioning mode) and the explorer."""
        carry = tuple(c for c in ("cause",) if c in df.columns)
        caches = {mode: ReplayCache.build(df, mode, carry=carry) for mode in modes}
        return cls(caches, window, partitioning)

    def _on_text(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        try:
            seconds = DedupPolicy(change["new"]).window.total_seconds()
        except (ValueError, TypeError) as exc:
            self.message.value = f"<b style='color:#b00'>{exc}</b>"
            return
        self._syncing = True
        try:
            self.window_slider.value = seconds
        finally:
            self._syncing = False
        self.update(window=seconds)

    def _on_change(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        self.update()

    def _controls(self) -> tuple[float, bool, str, tuple[pd.Timestamp, pd.Timestamp] | None]:
        rng = None
        if self.time_range is not None:
            low, high = self.time_range.value
            rng = (pd.Timestamp(low), pd.Timestamp(high))
        return self.window_slider.value, MODES[self.mode.value], self.entity.value, rng

    def update(
        self,
        window: timedelta | float | str | None = None,
        partitioning: bool | None = None,
        entity: str | None = None,
        time_range: tuple[Any, Any] | None = None,
        *,
        draw: bool = True,
    ) -> View:
        """Compute the view for these settings (the controls' values where omitted), set the
        controls to match, and redraw. No Spark job."""
        current = self._controls()
        seconds = parse_window(window).total_seconds() if window is not None else current[0]
        mode = current[1] if partitioning is None else partitioning
        chosen = current[2] if entity is None else entity
        if chosen not in self.entities:
            raise InputError(f"WindowExplorer: unknown entity {chosen!r}; known: {self.entities}")
        rng = current[3]
        if time_range is not None:
            rng = (pd.Timestamp(time_range[0]), pd.Timestamp(time_range[1]))
        view = self._view(seconds, mode, chosen, rng)
        self._syncing = True
        try:
            self.window_slider.value = seconds
            self.window_text.value = format_duration(seconds)
            self.mode.value = "enabled" if mode else "disabled"
            self.entity.value = chosen
        finally:
            self._syncing = False
        self.view = view
        if draw:
            self._draw(view)
        return view

    def _view(
        self,
        seconds: float,
        partitioning: bool,
        entity: str,
        rng: tuple[pd.Timestamp, pd.Timestamp] | None,
    ) -> View:
        cache = self.caches[partitioning]

        def pick(table: pd.DataFrame) -> pd.DataFrame:
            low, high = rng or (None, None)
            return narrow(table, entity, low, high, time="time")

        over_time = pick(cache.over_time(seconds))
        delays = pick(cache.resend_delays())
        held = pick(cache.held_over_time(seconds))
        sends = int(over_time["sends"].sum())
        duplicates = int(over_time["duplicates"].sum())
        rejected = int(over_time["rejected"].sum())
        judged = sends - rejected
        numbers = pd.DataFrame(
            {
                "figure": ["sends", "accepted", "dropped as duplicates", "rejected",
                           "share of judged sends dropped", "peak ids held"],
                "value": [f"{sends:,}", f"{judged - duplicates:,}", f"{duplicates:,}",
                          f"{rejected:,}", f"{duplicates / judged:.2%}" if judged else "-",
                          f"{int(held.groupby('time')['held'].sum().max()) if len(held) else 0:,}"],
            }
        )  # fmt: skip
        keys = narrow(cache.top_keys(seconds, n=50), entity)
        label = format_duration(seconds)
        where = "all entities" if entity == ALL_ENTITIES else entity
        mode = "partitioning enabled" if partitioning else "partitioning disabled"
        return View(
            window_s=seconds,
            partitioning=partitioning,
            entity=entity,
            time_range=rng,
            numbers=numbers,
            top_keys=keys.head(10).reset_index(drop=True),
            sends_over_time=charts.sends_over_time(
                over_time, title=f"Sends and dropped duplicates, {where}, window {label}, {mode}"
            ),
            resend_delays=charts.resend_delays(delays, seconds),
            ids_held=charts.ids_held(held, seconds),
        )

    def _draw(self, view: View) -> None:
        self.message.value = ""
        for output, figure in zip(
            self.charts, (view.sends_over_time, view.resend_delays, view.ids_held), strict=True
        ):
            output.clear_output(wait=True)
            with output:
                figure.show()
        self.numbers.clear_output(wait=True)
        with self.numbers:
            display(view.numbers.set_index("figure"))  # type: ignore[no-untyped-call]
        self.keys.clear_output(wait=True)
        with self.keys:
            display(view.top_keys)  # type: ignore[no-untyped-call]


def _range_options(times: list[Any], most: int = 400) -> list[tuple[str, pd.Timestamp]]:
    """At most ``most`` evenly spaced bucket times, labelled for the range slider."""
    if not times:
        return []
    step = max(1, math.ceil(len(times) / most))
    picked = list(times[::step])
    if picked[-1] != times[-1]:
        picked.append(times[-1])
    return [(pd.Timestamp(t).strftime("%Y-%m-%d %H:%M"), pd.Timestamp(t)) for t in picked]
