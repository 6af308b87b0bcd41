"""The benchmarks' tables: each run writes its figures into benchmarks/README.md and history.md.

Every ``make bench-*`` script ends by calling :func:`record` with its figures, one
:class:`Figure` a row. The README holds, per benchmark and size, one block between two marker
comments; :func:`record` rewrites the block of the run's benchmark and size with the run's
table (its command and baseline above it, no date). A run of a size the README has no block
for (a quick ``--rows 200000``) changes no block. Every run, whatever its size, is added to
history.md, dated and with its commit, newest first under its benchmark's marker (at the end
of the file when the marker is missing). ``--no-record`` (see :func:`add_option`) prints
only.

    from results_table import Figure, add_option, record, short_count

    record("make bench", short_count(10_000_000), [Figure("engine / floor", 0.83, "6.4 s, 5.1 s",
           "1.3x")], baseline="the floor", enabled=not args.no_record)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
HISTORY = HERE / "history.md"
HEADER = "| figure | ratio | raw | target |\n| --- | ---: | --- | --- |"


@dataclasses.dataclass(frozen=True)
class Figure:
    """One row of a run's table.

    Parameters
    ----------
    what : str
        What is compared, e.g. ``"engine / floor, wide rows"``.
    ratio : float or None
        Against the baseline measured in the same run; None for an absolute figure (what a
        user waits, a count).
    raw : str
        The raw figures behind it, with their units (``"floor 6.4 s, engine 5.1 s"``).
    target : str
        The target as stated (``"at most 1.3x"``), or ``""`` when there is none.
    met : bool or None
        Whether the run met the target; None when there is none.
    """

    what: str
    ratio: float | None
    raw: str
    target: str = ""
    met: bool | None = None

    def row(self) -> str:
        """The figure as a Markdown table row.

        Returns
        -------
        str
            ``| what | ratio | raw | target: met |``, pipes in the text escaped.
        """
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}x"
        target = self.target
        if self.met is not None:
            target = f"{target}: {'met' if self.met else 'NOT met'}"
        cells = [self.what, f"**{ratio}**" if ratio else "", self.raw, target or "none"]
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def short_count(rows: int) -> str:
    """A count as the tables write it: ``200 k``, ``10 M``, ``1.5 M``.

    Parameters
    ----------
    rows : int
        The count.

    Returns
    -------
    str
        The count in thousands (under a million) or millions, to three figures.
    """
    if rows < 1_000:
        return str(rows)
    value, unit = (rows / 1_000, "k") if rows < 1_000_000 else (rows / 1_000_000, "M")
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"


def add_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--no-record`` to a bench script's options.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The script's parser.
    """
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="print the figures only: write neither benchmarks/README.md nor history.md",
    )


def table(command: str, baseline: str, figures: Sequence[Figure]) -> str:
    """A run's table with its command and baseline above it, as the README shows it.

    Parameters
    ----------
    command : str
        The command line that measured it.
    baseline : str
        What the ratios are against.
    figures : sequence of Figure
        The rows.

    Returns
    -------
    str
        Markdown: one line of command and baseline, a blank line, the table.
    """
    rows = "\n".join(figure.row() for figure in figures)
    return f"`{command}`; against {baseline}.\n\n{HEADER}\n{rows}"


def markers(benchmark: str, size: str) -> tuple[str, str]:
    """The comments around a benchmark's block in the README.

    Parameters
    ----------
    benchmark : str
        Its make target, ``"make bench-load"``.
    size : str
        The size the block holds, ``"10 M sends"``.

    Returns
    -------
    tuple of str
        The opening and the closing comment.
    """
    return (
        f"<!-- written by {benchmark}, {size}: begin -->",
        f"<!-- written by {benchmark}, {size}: end -->",
    )


def rewrite(text: str, benchmark: str, size: str, block: str) -> str | None:
    """``text`` with the block of ``benchmark`` at ``size`` replaced by ``block``.

    Parameters
    ----------
    text : str
        The README's text.
    benchmark, size : str
        Which block (see :func:`markers`).
    block : str
        Its new content.

    Returns
    -------
    str or None
        The new text; None when the README has no such block.
    """
    begin, end = markers(benchmark, size)
    head, found, rest = text.partition(begin + "\n")
    _, closed, tail = rest.partition(end)
    if not (found and closed):
        return None
    return f"{head}{begin}\n{block}\n{end}{tail}"


def dated(benchmark: str, size: str, body: str, when: datetime.datetime, commit: str) -> str:
    """A run's entry in history.md: a heading with its date and commit, then its table.

    Parameters
    ----------
    benchmark, size : str
        The run's benchmark and size.
    body : str
        Its table (see :func:`table`).
    when : datetime.datetime
        When it ended (UTC).
    commit : str
        The code measured.

    Returns
    -------
    str
        Markdown, ending with a blank line.
    """
    stamp = when.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"### {stamp}, {size} ({benchmark}, {commit})\n\n{body}\n\n"


def add_to_history(text: str, benchmark: str, entry: str) -> str:
    """``text`` with ``entry`` first under the benchmark's marker, or appended without one.

    Parameters
    ----------
    text : str
        history.md's text.
    benchmark : str
        The run's make target.
    entry : str
        The run's entry (see :func:`dated`).

    Returns
    -------
    str
        The new text.
    """
    marker = f"<!-- runs of {benchmark}, newest first -->\n"
    if marker in text:
        head, _, tail = text.partition(marker)
        return f"{head}{marker}\n{entry}{tail.lstrip(chr(10))}"
    return f"{text.rstrip()}\n\n## {benchmark}\n\n{marker}\n{entry}"


def commit() -> str:
    """The checkout's commit, short, with ``+ changes`` when src/ or benchmarks/ differ.

    Returns
    -------
    str
        ``"5364703"``, ``"5364703 + changes"``, or ``"commit unknown"`` outside git.
    """

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "commit unknown"
    changed = git("diff", "--quiet", "HEAD", "--", "../src", ".").returncode != 0
    return head.stdout.strip() + (" + changes" if changed else "")


def record(
    benchmark: str,
    size: str,
    figures: Sequence[Figure],
    *,
    baseline: str,
    enabled: bool = True,
    readme: Path = README,
    history: Path = HISTORY,
) -> None:
    """Write a run's table into the README's block for it and date it in history.md.

    Parameters
    ----------
    benchmark : str
        The make target that runs it, ``"make bench-load"``.
    size : str
        What it ran on, ``"10 M sends"``: the README's block for this size is rewritten.
    figures : sequence of Figure
        The run's rows.
    baseline : str
        What the ratios are against, measured in the same run.
    enabled : bool
        False (``--no-record``): print the table only.
    readme, history : Path
        The files written (the tests point them elsewhere).
    """
    command = " ".join([f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    body = table(command, baseline, figures)
    print(f"\n{body}")
    if not enabled:
        return
    text = readme.read_text()
    updated = rewrite(text, benchmark, size, body)
    if updated is None:
        print(f"{readme.name} has no table for {benchmark} at {size}: {history.name} only")
    elif updated != text:
        readme.write_text(updated)
    now = datetime.datetime.now(datetime.UTC)
    entry = dated(benchmark, size, body, now, commit())
    old = history.read_text() if history.exists() else "# Benchmarks: every run\n"
    history.write_text(add_to_history(old, benchmark, entry))
    print(f"recorded in {history.name}" + ("" if updated is None else f" and {readme.name}"))
