"""``WindowExplorer``: the window, partitioning, entity and time-range controls and the charts
they drive. Spark runs once per partitioning mode, when the explorer is built (one
:class:`ReplayCache` each): the mode shown first is built before the explorer is drawn, the
others in a background thread while it is already in use. Every control change is answered
from the caches in memory and redraws the charts in place (:mod:`dedup_lib.workbench.redraw`)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd
from tqdm.auto import tqdm  # type: ignore[import-untyped]

from dedup_lib.analysis.totals import ALL_ENTITIES
from dedup_lib.errors import InputError
from dedup_lib.rules.durations import format_duration, format_window, parse_window
from dedup_lib.rules.policy import WINDOW_BOUNDS, DedupPolicy
from dedup_lib.sweep.cache import ReplayCache
from dedup_lib.text import SHORT, escape, shown
from dedup_lib.workbench.delay_bins import delay_bins
from dedup_lib.workbench.modes import ModeCaches
from dedup_lib.workbench.redraw import RedrawnCharts
from dedup_lib.workbench.style import widget_html
from dedup_lib.workbench.view import View, minute, mode_name, view_of

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import DataFrame

MIN_WINDOW_S, MAX_WINDOW_S = (b.total_seconds() for b in WINDOW_BOUNDS["service"][:2])
MODES = {"disabled": False, "enabled": True}


class WindowExplorer:
    """Controls and charts for choosing a duplicate-detection window, in a notebook.

    ``update(...)`` computes a :class:`View` from the caches (no Spark job) and redraws the
    charts in place; the widgets call it on every change. Display the explorer with
    ``explorer.widget``. A partitioning mode still being built in the background (see
    :meth:`from_frame`) is on the toggle from the start, marked as being prepared; picking it,
    :attr:`caches` and ``update(partitioning=...)`` wait for it.

    Parameters
    ----------
    caches : dict[bool, ReplayCache]
        One cache per partitioning mode (:meth:`from_frame` builds them).
    window : timedelta, float (seconds) or str, default "PT10M"
        The window shown first.
    partitioning : bool, default False
        The mode shown first.
    charts : RedrawnCharts, optional
        Where the charts are drawn (default: a new widget).

    Examples
    --------
    >>> from dedup_lib import WindowExplorer, get_spark, load_telemetry, sample_path
    >>> sends = load_telemetry(get_spark(), sample_path("incident.parquet")).valid
    >>> explorer = WindowExplorer.from_frame(sends, "PT10M", modes=(False,), progress=False)
    >>> explorer.entities
    ['(all)', 'notifications', 'orders', 'payments']

    One partitioning mode, one Spark pass (by default the other mode is built too, in the
    background). The methods' examples go on with this ``explorer``.
    """

    def __init__(
        self,
        caches: dict[bool, ReplayCache],
        window: timedelta | float | str = "PT10M",
        partitioning: bool = False,
        *,
        charts: RedrawnCharts | None = None,
    ) -> None:
        """``charts``: the widget to draw in, when one was made before the caches (see
        :meth:`from_frame`)."""
        if partitioning not in caches:
            raise InputError(f"WindowExplorer: no cache for partitioning={partitioning}")
        self._modes = ModeCaches(caches)
        first = next(iter(caches.values()))
        entities = sorted(
            {str(e) for c in caches.values() for e in c.summarize(60).entity} - {ALL_ENTITIES}
        )
        self.entities = [ALL_ENTITIES, *entities]
        times = first.over_time(60)["time"]
        self.times = sorted(times.unique()) if len(times) else []
        seconds = parse_window(window).total_seconds()
        self._make_controls(seconds, partitioning, [m for m, on in MODES.items() if on in caches])
        self._syncing = False
        # The first view computes what every later change reuses (resend delays, key
        # numbering), so control changes answer from memory.
        self.view: View | None = self._view(seconds, partitioning, ALL_ENTITIES, None)
        self.charts = charts if charts is not None else RedrawnCharts()
        self._draw(self.view)
        for control in (self.window_slider, self.mode, self.entity, self.time_range):
            if control is not None:
                control.observe(self._on_change, names="value")
        self.window_text.observe(self._on_text, names="value")
        wrap = widgets.Layout(flex_flow="row wrap", align_items="center")
        controls = [
            widgets.HBox([self.window_slider, self.window_text], layout=wrap),
            widgets.HBox([self.mode, self.entity, self.preparing], layout=wrap),
        ]
        if self.time_range is not None:
            controls.append(widgets.HBox([self.time_range, self.range_label], layout=wrap))
        outputs = [self.message, self.numbers, self.charts, self.keys]
        self.widget = widgets.VBox([*controls, *outputs])

    def _make_controls(self, seconds: float, partitioning: bool, modes: list[str]) -> None:
        """The controls, set to this window and mode, and the outputs beside the charts."""
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
            options=modes,
            value="enabled" if partitioning else "disabled",
            description="partitioning",
        )
        self.preparing = widgets.HTML(layout=widgets.Layout(margin="0 0 0 12px"))
        # Shown as text (an entity name is data), picked by its value.
        self.entity = widgets.Dropdown(
            options=[(shown(e, SHORT), e) for e in self.entities],
            value=ALL_ENTITIES,
            description="entity",
        )
        options = _range_options(self.times)
        # The slider's own readout is cut off at any width; the label shows the range in full.
        self.time_range = widgets.SelectionRangeSlider(
            options=options, index=(0, max(0, len(options) - 1)), description="time (UTC)",
            continuous_update=False, readout=False,
            layout=widgets.Layout(width="420px", min_width="300px"),
        ) if options else None  # fmt: skip
        self.range_label = widgets.Label(layout=widgets.Layout(margin="0 0 0 8px"))
        self.message = widgets.HTML()
        self.numbers = widgets.HTML()
        self.keys = widgets.HTML()

    @classmethod
    def from_frame(
        cls,
        df: DataFrame,
        window: timedelta | float | str = "PT10M",
        partitioning: bool = False,
        modes: Sequence[bool] = (False, True),
        *,
        background: bool = True,
        progress: bool | None = None,
    ) -> WindowExplorer:
        """Build the caches (one Spark pass per partitioning mode) and the explorer.

        Parameters
        ----------
        df : DataFrame
            Loaded sends (``LoadedTelemetry.valid``).
        window : timedelta, float (seconds) or str, default "PT10M"
            The window shown first.
        partitioning : bool, default False
            The mode shown first, built before this returns.
        modes : sequence of bool, default (False, True)
            The partitioning modes offered on the toggle.
        background : bool, default True
            Build the other modes in a thread while the explorer is in use; else before
            returning too.
        progress : bool, optional
            Show a progress bar of the steps (default: only in a notebook).

        Returns
        -------
        WindowExplorer
            Display ``explorer.widget`` in a notebook cell.

        Raises
        ------
        InputError
            ``partitioning`` not in ``modes``, a window that does not read, or an input
            :meth:`ReplayCache.build` refuses.

        Examples
        --------
        With ``explorer`` from the class's example, which this method built, its controls
        set to the window and the one mode asked:

        >>> explorer.window_text.value, explorer.mode.options
        ('10m', ('disabled',))
        """
        return _built(cls, df, window, partitioning, modes, background, progress)

    def _prepare(self, pending: dict[bool, Future[ReplayCache]]) -> None:
        """Offer these modes, still being built, on the toggle now: before the explorer is
        shown, as a change sent later from the building thread can reach a page still
        loading its widgets (Voila's) before it listens, and be lost."""
        self.preparing.value = f"<i>{' and '.join(map(mode_name, pending))}: being prepared…</i>"
        offered = {MODES[m] for m in self.mode.options} | set(pending)
        with self._quiet():  # new options select the first: the mode shown stays picked
            current = self.mode.value
            self.mode.options = [m for m, on in MODES.items() if on in offered]
            self.mode.value = current
        self._modes.add(pending, self._cache_map)

    @property
    def caches(self) -> dict[bool, ReplayCache]:
        """dict[bool, ReplayCache]: One cache per mode; waits for modes still being built."""
        self._modes.wait()
        return self._cache_map()

    def _cache_map(self) -> dict[bool, ReplayCache]:
        """The caches built so far; says which modes are still being prepared, or why one
        failed."""
        caches, progress = self._modes.collect()
        if progress.failed:
            mode, error = progress.failed[0]
            self.preparing.value = _in_red(f"{mode_name(mode)} failed: {_first_line(error)}")
        elif not progress.waiting:
            self.preparing.value = ""
        return caches

    def _cache(self, partitioning: bool) -> ReplayCache:
        self._modes.wait(partitioning)
        caches = self._cache_map()
        if partitioning not in caches:
            raise InputError(f"WindowExplorer: no cache for partitioning={partitioning}")
        return caches[partitioning]

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Controls set by the explorer itself within the block, not answered as a user's."""
        before, self._syncing = self._syncing, True
        try:
            yield
        finally:
            self._syncing = before

    def _on_text(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        try:
            seconds = DedupPolicy(change["new"]).window.total_seconds()
        except (ValueError, TypeError) as exc:
            self.message.value = _in_red(str(exc))
            return
        with self._quiet():
            self.window_slider.value = seconds
        self.update(window=seconds)

    def _on_change(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        if change["owner"] is not self.mode:
            self.update()
            return
        picked = MODES[change["new"]]
        if picked not in self._cache_map():
            wait = f"{mode_name(picked)} is being prepared: shown when ready…"
            self.message.value = f"<i>{escape(wait)}</i>"
        try:
            self.update()
        except Exception as exc:  # a mode whose build failed: said, and the toggle set back
            self.message.value = _in_red(_first_line(exc))
            with self._quiet():
                self.mode.value = change["old"]

    def _controls(self) -> tuple[float, bool, str, tuple[pd.Timestamp, pd.Timestamp] | None]:
        """The controls' values; the time range None where the slider spans all of it: every
        send, the resends of the last bucket included (its label is the bucket's start), and
        nothing to cut: a cut to the full span would double a mode's first view."""
        rng = None
        if self.time_range is not None and self.time_range.index != (
            0, len(self.time_range.options) - 1
        ):  # fmt: skip
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
        """Compute the view for these settings, set the controls to match, and redraw.

        The widgets call it on every change. No Spark job: the view is read from the mode's
        cache (waiting for a mode still being built).

        Parameters
        ----------
        window : timedelta, float (seconds) or str, optional
            The window; None: the slider's.
        partitioning : bool, optional
            The mode; None: the toggle's.
        entity : str, optional
            One entity, or ``(all)``; None: the dropdown's.
        time_range : tuple of two times, optional
            The start and end of the send times shown (anything ``pandas.Timestamp``
            reads); None: the range slider's.
        draw : bool, default True
            Redraw the charts and tables (False: only compute the view).

        Returns
        -------
        View
            ``window_s``, ``partitioning``, ``entity``, ``time_range``; ``numbers`` (a
            table of ``figure`` and ``value``: sends, accepted, dropped as duplicates,
            rejected, share dropped, peak ids held), ``top_keys`` and its ``keys_caption``,
            and the three charts' ``figures``.

        Raises
        ------
        InputError
            An entity the input does not have, a mode without a cache, or a window that
            does not read.

        Examples
        --------
        With ``explorer`` from the class's example:

        >>> view = explorer.update(window="PT1H", entity="orders")
        >>> explorer.window_text.value, view.keys_caption
        ('1h', 'Keys with the most sends dropped at 1h')
        >>> view.numbers.set_index("figure")["value"]["dropped as duplicates"]
        '2,945'
        >>> explorer.update(partitioning=True)
        Traceback (most recent call last):
        ...
        dedup_lib.errors.InputError: WindowExplorer: no cache for partitioning=True
        """
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
        with self._quiet():
            self.window_slider.value = seconds
            self.window_text.value = format_duration(seconds)
            self.mode.value = "enabled" if mode else "disabled"
            self.entity.value = chosen
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
        cache = self._cache(partitioning)
        return view_of(cache, seconds, partitioning, entity, rng, self._shown_range(rng))

    def _draw(self, view: View) -> None:
        self.message.value = ""
        # Sent again: the page may have missed the change sent from the building thread.
        self.preparing.send_state("value")
        self.charts.show(view.figures)
        self._show_range(view)
        self._show_tables(view)

    def _shown_range(self, rng: tuple[pd.Timestamp, pd.Timestamp] | None) -> tuple[Any, Any] | None:
        """The time range a view covers: the one chosen, else all the data's (None: no data)."""
        return rng or ((self.times[0], self.times[-1]) if self.times else None)

    def _show_range(self, view: View) -> None:
        span = self._shown_range(view.time_range)
        if self.time_range is not None and span is not None:
            self.range_label.value = f"{minute(span[0])} to {minute(span[1])}"

    def _show_tables(self, view: View) -> None:
        self.numbers.value = widget_html(view.numbers)
        self.keys.value = widget_html(view.top_keys, view.keys_caption)


_BAR = "{desc} {bar} {elapsed}"


def _built(
    cls: type[WindowExplorer],
    df: DataFrame,
    window: timedelta | float | str,
    partitioning: bool,
    modes: Sequence[bool],
    background: bool,
    progress: bool | None,
) -> WindowExplorer:
    """:meth:`WindowExplorer.from_frame`: the first mode's cache built under a progress bar,
    the explorer made, the other modes' caches started in a thread."""
    if partitioning not in modes:
        raise InputError(f"WindowExplorer: partitioning={partitioning} is not in {modes}")
    carry = tuple(c for c in ("cause",) if c in df.columns)
    later = [m for m in dict.fromkeys(modes) if m != partitioning]
    now = [partitioning] if background else [partitioning, *later]
    steps = [f"replaying with {mode_name(m)}" for m in now] + ["drawing the charts"]
    show = _in_notebook() if progress is None else progress
    # Made first, so the browser loads plotly.js while Spark works, not after.
    charts = RedrawnCharts()
    with tqdm(total=len(steps), disable=not show, leave=show, bar_format=_BAR) as bar:

        def step(i: int) -> None:
            bar.set_description_str(f"{steps[i]} ({i + 1} of {len(steps)})")

        caches = {}
        for i, mode in enumerate(now):
            step(i)
            caches[mode] = ReplayCache.build(df, mode, carry=carry)
            bar.update()
        step(len(now))
        explorer = cls(caches, window, partitioning, charts=charts)
        bar.update()
    _hide(bar)
    if background and later:
        # Started once the first view is computed, so it does not compete with it.
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer")
        explorer._prepare({m: pool.submit(_prepared, df, m, carry, window) for m in later})
        pool.shutdown(wait=False)
    return explorer


def _prepared(
    df: DataFrame, partitioning: bool, carry: tuple[str, ...], window: timedelta | float | str
) -> ReplayCache:
    """A mode's cache, built and with what its first view computes once (codes, delays, key
    numbering) computed too: the toggle then answers as fast as any other change."""
    cache = ReplayCache.build(df, partitioning, carry=carry)
    for table in (cache.over_time, cache.held_over_time, cache.top_keys):
        table(window)
    delay_bins(cache)
    return cache


def _in_red(text: str) -> str:
    """``text`` (data: escaped) as an error line for an ``HTML`` widget."""
    return f"<b style='color:#b00'>{escape(text)}</b>"


def _first_line(error: BaseException) -> str:
    """An error's first line, or its type's name when it has no message."""
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (where a progress bar is a widget)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in shell.config


def _hide(bar: Any) -> None:
    """Hide a finished notebook progress bar. Closing its widget instead (``leave=False``)
    leaves the cell's output pointing at a widget that no longer exists, which Voila and a
    reopened notebook show as "Error displaying widget: model not found"."""
    container = getattr(bar, "container", None)
    if container is not None:
        container.layout.display = "none"


def _range_options(times: list[Any], most: int = 400) -> list[tuple[str, pd.Timestamp]]:
    """At most ``most`` evenly spaced bucket times, labelled for the range slider."""
    if not times:
        return []
    step = max(1, math.ceil(len(times) / most))
    picked = list(times[::step])
    if picked[-1] != times[-1]:
        picked.append(times[-1])
    return [(minute(t), pd.Timestamp(t)) for t in picked]
