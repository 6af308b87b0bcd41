"""WindowExplorer: update() answers from the caches and agrees with detect_duplicates."""

from __future__ import annotations

import pandas as pd
import plotly.io as pio
import pytest

from dedup_lib import DedupPolicy, WindowExplorer, detect_duplicates, summarize
from dedup_lib.workbench.delay_bins import _LAID_OUT, delay_bins
from replay_kit import mixed_scenario


@pytest.fixture(scope="module")
def explorer(spark):
    from dedup_lib import generate_telemetry

    previous, pio.renderers.default = pio.renderers.default, "json"
    sends = generate_telemetry(spark, 4_000, seed=9, scenario=mixed_scenario()).persist()
    explorer = WindowExplorer.from_frame(sends, window="PT10M")
    yield explorer, sends
    pio.renderers.default = previous
    sends.unpersist()


def _value(view, figure):
    return view.numbers.set_index("figure").loc[figure, "value"]


@pytest.mark.parametrize(("window", "partitioning"), [("PT20S", False), ("PT1H", True)])
def test_update_agrees_with_the_engine(explorer, window, partitioning):
    ex, sends = explorer
    view = ex.update(window=window, partitioning=partitioning, entity="(all)", draw=False)
    policy = DedupPolicy(window, partitioning=partitioning)
    total = summarize(detect_duplicates(sends, policy)).iloc[-1]
    assert _value(view, "sends") == f"{total.sends:,}"
    assert _value(view, "dropped as duplicates") == f"{total.duplicates:,}"
    assert _value(view, "rejected") == f"{total.rejected:,}"
    assert view.window_s == policy.window.total_seconds()
    assert ex.window_slider.value == pytest.approx(view.window_s)
    assert ex.mode.value == ("enabled" if partitioning else "disabled")
    for figure in (view.sends_over_time, view.resend_delays, view.ids_held):
        assert figure.layout.title.text
        assert figure.layout.xaxis.title.text


def test_the_keys_table_says_what_it_shows(explorer):
    ex, _ = explorer
    dropping = ex.update(window="PT10M", entity="(all)", draw=False)
    assert dropping.keys_caption == "Keys with the most sends dropped at 10m"
    assert dropping.keys_caption in ex.keys.value


def test_the_caption_says_whether_any_send_dropped():
    from dedup_lib.workbench.view import _keys_caption

    keys = pd.DataFrame({"entity": ["<b>q</b>"], "key": ["k"], "sends": [3], "duplicates": [0]})
    assert _keys_caption(keys, 1.0, False) == "No send dropped at 1s: the keys sent most often"
    assert _keys_caption(keys.assign(duplicates=2), 600.0, False).startswith("Keys with the most")
    assert _keys_caption(keys.iloc[:0], 600.0, False) == "No key sent more than once (window 10m)"


def test_entity_and_time_range_narrow_the_view(explorer):
    ex, _ = explorer
    whole = ex.update(window="PT10M", entity="(all)", draw=False)
    one = ex.update(entity="q1", draw=False)
    assert ex.entity.value == "q1"
    assert set(one.top_keys["entity"]) <= {"q1"}
    assert int(_value(one, "sends").replace(",", "")) < int(_value(whole, "sends").replace(",", ""))
    start = pd.Timestamp("2026-03-02T01:00", tz="UTC")
    end = pd.Timestamp("2026-03-02T02:00", tz="UTC")
    hour = ex.update(entity="(all)", time_range=(start, end), draw=False)
    assert hour.keys_caption.endswith("dropped at 10m, over the whole time span")
    assert int(_value(hour, "sends").replace(",", "")) < int(
        _value(whole, "sends").replace(",", "")
    )
    with pytest.raises(ValueError, match="unknown entity 'nope'"):
        ex.update(entity="nope", draw=False)


@pytest.mark.connect
def test_the_controls_drive_update(explorer):
    ex, _ = explorer
    ex.update(window="PT10M", entity="(all)", draw=False)
    ex.window_text.value = "PT5M"
    assert ex.view is not None
    assert ex.view.window_s == 300
    assert ex.window_slider.value == pytest.approx(300)
    ex.window_slider.value = 3600
    assert ex.view.window_s == pytest.approx(3600)
    ex.window_text.value = "PT5S"
    assert "between 00:00:20" in ex.message.value
    assert ex.view.window_s == pytest.approx(3600)
    assert set(ex.caches) == {False, True}  # the toggle offers a mode once it is built
    ex.mode.value = "enabled"
    assert ex.view.partitioning


def test_a_change_redraws_the_same_charts_in_place(explorer):
    ex, _ = explorer
    ex.update(window="PT10M", partitioning=False, entity="(all)", time_range=_whole(ex))
    charts = ex.charts
    before = [f["revision"] for f in charts.figures]
    held = charts.shown[2]["data"][0]["y"]
    tables = ex.numbers.value
    ex.window_text.value = "PT1H"
    assert ex.charts is charts
    assert charts in ex.widget.children
    shown = charts.shown
    assert shown[0]["layout"]["title"]["text"] == ex.view.sends_over_time.layout.title.text
    assert "window 1h" in shown[0]["layout"]["title"]["text"]
    assert [t["type"] for t in shown[1]["data"]] == [t.type for t in ex.view.resend_delays.data]
    assert shown[2]["data"][0]["y"] != held
    assert all(a != b for a, b in zip(before, [f["revision"] for f in charts.figures], strict=True))
    assert ex.numbers.value != tables
    assert _value(ex.view, "sends") in ex.numbers.value


def test_the_range_label_shows_the_whole_range(explorer):
    ex, _ = explorer
    start = pd.Timestamp("2026-03-02T01:00", tz="UTC")
    end = pd.Timestamp("2026-03-02T02:30", tz="UTC")
    ex.update(time_range=(start, end))
    assert ex.range_label.value == "2026-03-02 01:00 to 2026-03-02 02:30"
    assert ex.time_range.readout is False
    ex.update(time_range=_whole(ex))


def test_the_slider_over_the_whole_range_shows_every_resend(explorer):
    ex, _ = explorer
    ex.time_range.index = (0, len(ex.time_range.options) - 1)
    view = ex.update(window="PT10M", partitioning=False, entity="(all)", draw=False)
    assert view.time_range is None
    drawn = sum(sum(bar.y) for bar in view.resend_delays.data)
    assert drawn == len(ex.caches[False].resend_delays()) > 0


def test_a_mode_being_built_is_on_the_toggle_and_picking_it_waits(explorer):
    """The toggle offers every mode from the start (a change sent from the building thread
    can be lost by a page still loading); picking one still being built waits for it, and
    one whose build failed says why and sets the toggle back."""
    import threading
    from concurrent.futures import Future

    ex, _ = explorer
    built = ex.caches
    waiting = WindowExplorer({False: built[False]}, "PT10M")
    pending: Future = Future()
    waiting._prepare({True: pending})
    assert waiting.mode.options == ("disabled", "enabled")
    assert "partitioning enabled: being prepared" in waiting.preparing.value
    messages = []
    waiting.message.observe(lambda c: messages.append(c["new"]), names="value")
    threading.Timer(0.5, pending.set_result, [built[True]]).start()
    waiting.mode.value = "enabled"
    assert "partitioning enabled is being prepared: shown when ready" in messages[0]
    assert waiting.view is not None
    assert waiting.view.partitioning
    assert waiting.message.value == ""
    assert waiting.preparing.value == ""

    failing = WindowExplorer({False: built[False]}, "PT10M")
    broken: Future = Future()
    failing._prepare({True: broken})
    broken.set_exception(RuntimeError("<b>no</b> memory left\nat line 2"))
    failing.mode.value = "enabled"
    assert failing.mode.value == "disabled"
    assert failing.message.value == "<b style='color:#b00'>&lt;b&gt;no&lt;/b&gt; memory left</b>"
    assert failing.view is not None
    assert not failing.view.partitioning


def _whole(ex):
    return ex.times[0], ex.times[-1]


@pytest.mark.connect
def test_the_other_mode_is_built_in_the_background(spark, capsys):
    from dedup_lib import generate_telemetry

    sends = generate_telemetry(spark, 1_000, seed=3, scenario=mixed_scenario()).persist()
    ex = WindowExplorer.from_frame(sends, window="PT10M", partitioning=True)
    assert ex.mode.value == "enabled"
    assert ex.mode.options == ("disabled", "enabled")  # both offered before either is picked
    assert ex.message.value == ""
    assert ex.view is not None
    assert ex.view.partitioning
    assert set(ex.caches) == {False, True}
    # what the other mode's first view computes once is ready with it, so the toggle is quick
    prepared = ex.caches[False]
    assert prepared in _LAID_OUT
    assert len(delay_bins(prepared)) == len(prepared.resend_delays())
    assert "codes" in vars(prepared)  # computed once, with the cache
    view = ex.update(partitioning=False, draw=False)
    assert not view.partitioning
    assert ex.mode.options == ("disabled", "enabled")
    assert ex.preparing.value == ""
    assert capsys.readouterr().err == ""
    WindowExplorer.from_frame(sends, modes=(False,), background=False, progress=True)
    assert "replaying with partitioning disabled (1 of 2)" in capsys.readouterr().err
    sends.unpersist()


def test_an_empty_selection_says_so_in_words(explorer):
    ex, _ = explorer
    start = pd.Timestamp("2031-01-01T00:00", tz="UTC")
    end = pd.Timestamp("2031-01-01T01:00", tz="UTC")
    view = ex.update(window="PT10M", entity="q1", time_range=(start, end), draw=False)
    scope = "on q1 between 2031-01-01 00:00 and 2031-01-01 01:00 UTC"
    for figure in (view.sends_over_time, view.resend_delays, view.ids_held):
        words = " ".join(a.text for a in figure.layout.annotations)
        assert scope in words
        assert not figure.layout.yaxis.visible
    assert _value(view, "sends") == "0"
    ex.update(entity="(all)", time_range=_whole(ex), draw=False)


@pytest.mark.connect
def test_the_charts_widget_exists_before_spark_works(spark, monkeypatch):
    """The browser loads plotly.js when the charts' widget is made: made before the replay,
    that load overlaps Spark's work instead of delaying the first chart (about a second)."""
    from dedup_lib import generate_telemetry
    from dedup_lib.sweep.cache import ReplayCache
    from dedup_lib.workbench import explorer as module

    events: list[str] = []
    made, build = module.RedrawnCharts.__init__, ReplayCache.build.__func__

    def making(self, *args, **kwargs):
        events.append("charts")
        made(self, *args, **kwargs)

    def building(cls, *args, **kwargs):
        events.append("replay")
        return build(cls, *args, **kwargs)

    monkeypatch.setattr(module.RedrawnCharts, "__init__", making)
    monkeypatch.setattr(ReplayCache, "build", classmethod(building))
    sends = generate_telemetry(spark, 500, seed=4, scenario=mixed_scenario())
    ex = WindowExplorer.from_frame(sends, modes=(False,), background=False, progress=False)

    assert events == ["charts", "replay"]
    assert ex.charts.figures


def test_hostile_names_are_text_in_every_widget(spark):
    """Entity names and MessageIds are drawn in the explorer's own HTML (its tables, its
    messages), its entity list and its charts: as text everywhere."""
    from html.parser import HTMLParser

    from pyspark.sql import functions as F

    from dedup_lib import generate_telemetry
    from dedup_lib.text import SHORT, shown
    from hostile_kit import IMG, LONG, SCRIPT, SVG

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.made: list[str] = []

        def handle_starttag(self, tag, attrs):
            if any(name == "data-pwn" or name.startswith("on") for name, _ in attrs):
                self.made.append(tag)

    def made(html: str) -> list[str]:
        tags = Tags()
        tags.feed(html)
        return tags.made

    sends = generate_telemetry(spark, 600, seed=5, scenario=mixed_scenario())
    entity = F.when(F.col("entity") == "q1", F.lit(LONG)).otherwise(F.concat(F.lit(IMG), "entity"))
    sends = sends.withColumn("entity", entity)
    sends = sends.withColumn("message_id", F.concat(F.lit(SCRIPT), "message_id"))
    ex = WindowExplorer.from_frame(sends, modes=(False,), background=False, progress=False)
    labels = dict(ex.entity.options)
    assert labels[shown(LONG, SHORT)] == LONG  # picked by the value, shown cut
    for entity_name in ex.entities:
        ex.update(entity=entity_name)
        assert made(ex.numbers.value) == []
        assert made(ex.keys.value) == []
        for figure in ex.charts.shown:
            assert "<" not in figure["layout"]["title"]["text"]
    assert "&lt;script data-pwn&gt;" in ex.keys.value  # the top keys, as text
    assert "Keys with the most sends dropped at 10m" in ex.keys.value
    ex.window_text.value = SVG
    assert made(ex.message.value) == []
    assert "&lt;svg data-pwn" in ex.message.value
