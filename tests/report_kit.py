"""What the postmortem report on the incident sample must say: its narrative, its figures,
its charts inlined, and nothing of how it was run. Checked on the report the installed wheel
writes (``test_wheel.py``)."""

from __future__ import annotations

import html as markup
import re

from dedup_lib.rules.durations import format_window, parse_window
from dedup_lib.sweep.grid import configurable_window

#: The report's arguments: the incident sample at 20 s, checked against what a PT1M broker
#: kept of orders.
WINDOW = "PT20S"
KEPT = "incident-kept/orders.json.gz"
NAME = "postmortem-incident-PT20S.html"


def _text_of(html: str) -> str:
    """The page's text, each tag a space; a label's line break (``<wbr>``) none."""
    return re.sub(r"<[^>]+>", " ", re.sub(r"<wbr/?>", "", html))


def check_incident_report(html: str) -> None:
    """The report on the incident sample at :data:`WINDOW`, with :data:`KEPT`, says what it
    must (an assertion fails naming what is missing)."""
    # the narrative and the figures of this window
    assert "Incident postmortem" in html
    assert "window 20s, partitioning disabled" in html
    assert "3,310 resends: 2,707 caught, 603 reached consumers again" in html
    # by content: 206 resends under a new id, the rest after the window (an HTML table)
    cells = _text_of(html)
    assert re.search(r"notifications\s+new MessageId\s+206", cells)
    assert re.search(r"orders\s+after the window\s+397", cells)
    assert "No collisions: no message was lost to a reused id" in html
    # checked against the broker: a 20 s replay keeps all a 1 min broker kept, and more
    assert "Every message the broker kept that the telemetry explains agrees with the" in html
    assert "accepted sends are not in the export" in html
    assert "No export of what the broker kept" not in html
    # charts: four plotly figures, plotly.js inlined once, no CDN needed
    assert len(re.findall(r'class="plotly-graph-div"', html)) == 4
    assert "Resends that reached consumers again, by cause" in html
    assert html.count("plotly.js v") >= 1
    assert not re.findall(r'<script[^>]*src="http', html)
    # code is hidden, errors are absent
    assert "Traceback" not in html
    # nor Spark's log lines: they go to its log file (dedup_lib.spark.spark_log_path)
    assert not re.search(r"\b(WARN|ERROR) \w+: |log4j|incubator modules", html)
    assert "cache = ReplayCache.build" not in html
    check_title_summary_and_no_instructions(html)


def check_title_summary_and_no_instructions(html: str) -> None:
    """The page is titled with its entity, window and time range; it opens with a summary in
    words whose figures are those of the tables below it; it never tells how to run it."""
    head = re.search(r"<head>.*?<title>(.*?)</title>", html, re.S)
    assert head is not None
    assert re.fullmatch(
        r"Incident postmortem: all entities, window PT20S,"
        r" \d{4}-\d\d-\d\d \d\d:\d\d to \d{4}-\d\d-\d\d \d\d:\d\d UTC",
        markup.unescape(head.group(1)),
    )
    text = re.sub(r"\s+", " ", markup.unescape(_text_of(html)))
    for how_to in ("make postmortem", "Run it here", "`KEPT`", "KEPT to", "--kept", "set KEPT"):
        assert how_to not in text
    assert "notebook-only" not in html
    summary = re.search(
        r"(\d[\d,]*) resends reached consumers again .*?(\d[\d,]*) messages were lost .*?"
        r"a window of (P\w+) \(([^)]*)\) would have prevented them, and lost (\d[\d,]*) messages",
        text,
    )
    assert summary is not None, text[:2000]
    again, lost, window, words, lost_then = summary.groups()
    # the title and the summary come first, before the tables it sums
    title = markup.unescape(head.group(1))
    heading = text.index(title, text.index(title) + 1)
    assert heading < text.index("input read valid")
    assert text.index("resends reached consumers again") < text.index("What the broker did")
    # its figures are the tables': missed resends by cause, and no collisions
    table = text[text.index("What reached consumers twice, by content") :]
    missed = re.findall(r"(\w+) (new MessageId|after the window|no MessageId) (\d[\d,]*)", table)
    assert missed
    assert int(again.replace(",", "")) == sum(int(n.replace(",", "")) for *_, n in missed)
    assert "2,707 caught, 603 reached consumers again" in text  # and the ground truth's
    assert (lost, lost_then) == ("0", "0")
    late = re.search(r"after the window \d[\d,]* (\S+)", table)
    assert late is not None
    assert window == format_window(configurable_window(parse_window(late.group(1))), "iso")
    assert words == format_window(parse_window(window), "words")
