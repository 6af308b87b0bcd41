"""The headless postmortem: papermill runs notebook 04, nbconvert writes one offline HTML."""

from __future__ import annotations

import html as markup
import re
from html.parser import HTMLParser

import pytest

from dedup_lib import configurable_window, format_window, parse_window, run_postmortem, sample_path
from dedup_lib.cli import main


@pytest.mark.spark  # starts Spark in a child process
def test_postmortem_writes_a_self_contained_report(tmp_path):
    kept = sample_path("incident-kept/orders.json.gz")  # what a PT1M broker kept of orders
    report = run_postmortem(
        sample_path("incident.parquet"), window="PT20S", out_dir=str(tmp_path), kept=kept
    )
    assert report.name == "postmortem-incident-PT20S.html"
    html = report.read_text()
    # the narrative and the figures of this window
    assert "Incident postmortem" in html
    assert "window 20s, partitioning disabled" in html
    assert "3,310 resends: 2,707 caught, 603 reached consumers again" in html
    # by content: 206 resends under a new id, the rest after the window (an HTML table)
    cells = re.sub(r"<[^>]+>", " ", html)
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
    _check_title_summary_and_no_instructions(html)


def _check_title_summary_and_no_instructions(html: str) -> None:
    """The page is titled with its entity, window and time range; it opens with a summary in
    words whose figures are those of the tables below it; it never tells how to run it."""
    head = re.search(r"<head>.*?<title>(.*?)</title>", html, re.S)
    assert head is not None
    assert re.fullmatch(
        r"Incident postmortem: all entities, window PT20S,"
        r" \d{4}-\d\d-\d\d \d\d:\d\d to \d{4}-\d\d-\d\d \d\d:\d\d UTC",
        markup.unescape(head.group(1)),
    )
    text = re.sub(r"\s+", " ", markup.unescape(re.sub(r"<[^>]+>", " ", html)))
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


def test_postmortem_command_names_a_missing_input(capsys, tmp_path):
    assert main(["postmortem", str(tmp_path / "none.parquet"), "--quiet"]) == 1
    assert "does not exist" in capsys.readouterr().err
    sample = sample_path("incident.parquet")
    assert main(["postmortem", sample, "--kept", str(tmp_path / "none.json"), "--quiet"]) == 1
    assert "none.json does not exist" in capsys.readouterr().err


def test_sample_path_lists_the_samples():
    with pytest.raises(FileNotFoundError, match=r"incident\.parquet"):
        sample_path("nope.parquet")


class _Elements(HTMLParser):
    """Every element of a page with its attributes, the page's text, and its CSP."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.spark  # starts Spark in a child process
def test_hostile_ids_entity_and_file_names_stay_text_in_the_report(hostile_report):
    from dedup_lib.workbench import csp
    from hostile_kit import IMG, SCRIPT

    html = hostile_report.read_text()
    page = _Elements()
    page.feed(html)
    made = [
        (tag, attrs)
        for tag, attrs in page.elements
        if "data-pwn" in attrs or any(k.startswith("on") and "pwn" in v for k, v in attrs.items())
    ]
    assert made == []  # no element and no handler came from the data...
    text = "".join(page.text)
    assert IMG in text  # ...which shows as its characters: the entity
    assert SCRIPT in text  # another entity, in the tables
    assert "'pwn-file')&gt; sends.parquet" in html  # the file name, in the input's table
    # the report runs only the scripts the library wrote (and says so to the browser)
    policies = [
        a["content"] for t, a in page.elements if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert len(policies) == 1
    assert all(h in policies[0] for h in csp.script_hashes(html))
    assert page.elements.index(
        ("meta", {"http-equiv": "Content-Security-Policy", "content": policies[0]})
    ) < min(i for i, (tag, _) in enumerate(page.elements) if tag == "script")
    assert "Traceback" not in html
