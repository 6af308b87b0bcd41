"""benchmarks/results_table.py: a run's table written into its README block and dated in the
history; and benchmarks/README.md kept short, its blocks in the form the runs write."""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from results_table import (  # noqa: E402
    HEADER,
    Figure,
    add_to_history,
    dated,
    markers,
    record,
    rewrite,
    short_count,
    table,
)

README_LINES = 250
ROWS = [
    Figure("engine / floor, wide rows", 0.8312, "engine 5.1 s, floor 6.4 s", "at most 1.3x", True),
    Figure("control change, worst of 5", None, "2.50 s", "under 2 s", False),
    Figure("Python kernel / floor", 1.26, "a | b"),
]
README = """# Benchmarks

## The engine

<!-- written by make bench, 10 M sends: begin -->
old table
<!-- written by make bench, 10 M sends: end -->

<!-- written by make bench, 1 M sends: begin -->
untouched
<!-- written by make bench, 1 M sends: end -->
"""
HISTORY = """# Benchmarks: every run

## The engine (`make bench`)

<!-- runs of make bench, newest first -->

Kept by hand: an old table.
"""


def test_a_figure_is_a_row_of_ratio_raw_and_target() -> None:
    assert [figure.row() for figure in ROWS] == [
        "| engine / floor, wide rows | **0.83x** | engine 5.1 s, floor 6.4 s | at most 1.3x: met |",
        "| control change, worst of 5 |  | 2.50 s | under 2 s: NOT met |",
        "| Python kernel / floor | **1.26x** | a \\| b | none |",
    ]


def test_counts_are_short() -> None:
    counts = [5, 56_234, 200_000, 999_999, 10_000_000, 8_360_000, 2_500_000_000]
    assert [short_count(n) for n in counts] == [
        "5", "56.2 k", "200 k", "1,000 k", "10 M", "8.36 M", "2,500 M",
    ]  # fmt: skip


def test_the_run_rewrites_its_own_block_only() -> None:
    body = table("benchmarks/bench_engine.py --rows 10000000", "the floor", ROWS)
    text = rewrite(README, "make bench", "10 M sends", body)
    assert text is not None
    assert "old table" not in text
    assert "untouched" in text
    assert f"`benchmarks/bench_engine.py --rows 10000000`; against the floor.\n\n{HEADER}\n" in text
    begin, end = markers("make bench", "10 M sends")
    assert text.index(begin) < text.index("**0.83x**") < text.index(end)
    assert rewrite(text, "make bench", "10 M sends", body) == text  # again: the same text
    assert rewrite(README, "make bench", "100 M sends", body) is None  # no block for the size


def test_the_history_has_the_newest_run_first_under_its_marker() -> None:
    when = datetime.datetime(2026, 12, 4, 18, 5, tzinfo=datetime.UTC)
    first = dated("make bench", "10 M sends", "first table", when, "5364703")
    assert first == "### 2026-12-04 18:05 UTC, 10 M sends (make bench, 5364703)\n\nfirst table\n\n"
    second = dated("make bench", "10 M sends", "second table", when, "abcdef0 + changes")
    text = add_to_history(add_to_history(HISTORY, "make bench", first), "make bench", second)
    assert text.index("second table") < text.index("first table") < text.index("Kept by hand")
    elsewhere = add_to_history(text, "make bench-load", first)
    assert elsewhere.startswith(text.rstrip())
    assert elsewhere.endswith("## make bench-load\n\n<!-- runs of make bench-load, newest first -->"
                              f"\n\n{first}")  # fmt: skip


def test_record_writes_both_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme, history = tmp_path / "README.md", tmp_path / "history.md"
    readme.write_text(README)
    monkeypatch.setattr(sys, "argv", ["/x/bench_engine.py", "--rows", "10000000"])
    record("make bench", "10 M sends", ROWS, baseline="the floor", readme=readme, history=history)
    assert "| engine / floor, wide rows | **0.83x** |" in readme.read_text()
    written = history.read_text()
    assert written.startswith("# Benchmarks: every run\n")
    assert re.search(
        r"^### \d{4}-\d\d-\d\d \d\d:\d\d UTC, 10 M sends \(make bench, ", written, re.M
    )
    assert "`benchmarks/bench_engine.py --rows 10000000`; against the floor." in written

    record("make bench", "2 k sends", ROWS, baseline="the floor", readme=readme, history=history)
    assert readme.read_text().count("**0.83x**") == 1  # a size without a block: history only
    assert history.read_text().count("**0.83x**") == 2

    before = (readme.read_text(), history.read_text())
    record("make bench", "10 M sends", ROWS[:1], baseline="b", enabled=False, readme=readme,
           history=history)  # fmt: skip
    assert (readme.read_text(), history.read_text()) == before


def test_the_readme_is_short_and_its_tables_are_the_runs() -> None:
    """At most 250 lines; each block between its markers holds a table the runs write."""
    text = (BENCHMARKS / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    blocks = re.findall(
        r"^<!-- written by (.+?), (.+?): begin -->\n(.*?)\n<!-- written by \1, \2: end -->$",
        text,
        re.M | re.S,
    )
    assert len(blocks) >= 8
    for benchmark, size, body in blocks:
        command, _, rows = body.partition(f"\n\n{HEADER}\n")
        assert re.fullmatch(r"`benchmarks/\w+\.py[^`]*`; against .+\.", command), (benchmark, size)
        assert rows, (benchmark, size)
        assert all(re.fullmatch(r"\|.+\|", row) for row in rows.splitlines()), (benchmark, size)
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "dated runs belong in history.md"


def test_the_readme_and_guides_quote_no_dated_run() -> None:
    """Figures in the README and docs/ come with their command, undated: the dated runs are in
    benchmarks/history.md (a date inside code, as an example's input, is not a run)."""
    root = BENCHMARKS.parent
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        if "generated" in page.relative_to(root).parts:
            continue
        prose = re.sub(r"```.*?```|`[^`\n]*`", "", page.read_text(), flags=re.S)
        dates = re.findall(r"\b20\d\d-\d\d-\d\d\b(?!T)", prose)
        assert not dates, f"{page.relative_to(root)} has dated runs: {dates}"
