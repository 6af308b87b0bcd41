"""The ``dedup-lib`` command lines of the README and the guides run as written, those that end
by themselves: on the run's Spark session, through the command's own entry point
(:func:`dedup_lib.cli.main`: the same parsing and code as the installed command, without a
JVM of its own per line). Each runs in a fresh folder where ``data/`` is the checkout's,
``landing/`` holds the incident sample (the live guide's folder), ``sends.csv`` is a file with
the columns the guide maps, and ``/tmp/`` is that folder. A line that does not end by itself,
or takes a machine's paths, is in :data:`NOT_RUN` with where it is tested instead; a new
line must be one or the other. Two lines the command's parser reads alike (one names a default
the other leaves out) run once.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from dedup_lib.cli import main
from pages_kit import PAGES, ROOT, SHELL, enter_folder

COMMAND = ".venv/bin/dedup-lib"

#: Command lines not run here, by their first words, and why.
NOT_RUN = {
    "explore": "serves its page until stopped: tests/cli/test_explore_server.py",
    "generate /tmp/sends --rows 10000000": "10 M sends, minutes: tests/cli/test_cli.py, smaller",
    "watch landing/ --window": "watches until stopped: tests/cli/test_watch_service.py",
    "watch /var/lib/otelcol": "a machine's Collector folder: tests/cli/test_watch_service.py",
}


def _says_the_entities_settings(out: str) -> None:
    """The entity-settings guide's line: the verdicts per entity with the settings, then the
    missed resends and collisions they explain."""
    assert "per-entity settings: audit detection off; inventory window 1h" in out
    assert "payments window 10m, partitioning enabled" in out
    assert "Duplicates were not checked on audit: detection is off there" in out
    misses = out.split("Missed resends", 1)[1].split("Collisions", 1)[0]
    assert "detection off" in misses
    assert "new MessageId" in misses
    # payments refuses billing-batch's batches (partitioning and detection): its replays hours
    # later are first deliveries there, not resends after the window.
    assert "after the window" not in misses
    lost = out.split("Collisions: ", 1)[1]
    assert "all-zero GUID" in lost
    assert "legacy-export" in lost


#: What a line prints that its page says, by the line's first words: checked on its output.
SAYS = {
    "simulate data/samples/day.parquet --entities data/samples/entities-arm.json": (
        _says_the_entities_settings
    ),
}


def _command_lines() -> list[tuple[str, str]]:
    """Every ``dedup-lib`` line of the pages' shell blocks, continuation lines joined."""
    found = []
    for page in PAGES:
        for block in SHELL.findall(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                if line.strip().startswith(COMMAND):
                    found.append((str(page.relative_to(ROOT)), line.strip()))
    return found


def _words(line: str) -> list[str]:
    return shlex.split(line, comments=True)[1:]


def _parsed(line: str) -> tuple[tuple[str, str], ...]:
    """What the command's parser makes of a line: two lines that say the same (one names a
    default the other leaves out) are one command, run once."""
    from dedup_lib.cli import parser

    return tuple(sorted((k, repr(v)) for k, v in vars(parser().parse_args(_words(line))).items()))


def _distinct(lines: list[tuple[str, str]]) -> list[tuple[int, str, str]]:
    """The lines to run, numbered in the pages' order: each command once."""
    seen: set[tuple[tuple[str, str], ...]] = set()
    found = []
    for i, (page, line) in enumerate(lines):
        if _not_run(line) is None and (parsed := _parsed(line)) not in seen:
            seen.add(parsed)
            found.append((i, page, line))
    return found


def _not_run(line: str) -> str | None:
    text = " ".join(_words(line))
    return next((why for head, why in NOT_RUN.items() if text.startswith(head)), None)


def test_every_command_line_is_run_or_says_why_not() -> None:
    lines = [line for _, line in _command_lines()]
    assert len(lines) >= 10, lines
    named = {head for head in NOT_RUN for line in lines if " ".join(_words(line)).startswith(head)}
    assert named == set(NOT_RUN), f"NOT_RUN names lines no page has: {set(NOT_RUN) - named}"


@pytest.mark.slow
@pytest.mark.usefixtures("compiled_test")  # the day sample's 200 k sends, in most of them
@pytest.mark.parametrize(
    ("page", "line"),
    [
        pytest.param(page, line, id=f"{Path(page).stem}-{i}-{_words(line)[0]}")
        for i, page, line in _distinct(_command_lines())
    ],
)
def test_the_command_lines_of_the_readme_and_guides_run(
    spark, tmp_path, monkeypatch, capsys, page, line
) -> None:
    argv = [w.replace("/tmp/", f"{tmp_path}/") for w in _words(line)]
    enter_folder(tmp_path, monkeypatch)
    (tmp_path / "data").symlink_to(ROOT / "data")
    (tmp_path / "sends.csv").write_text("Id,Ts\na,2026-03-02T00:00:00Z\na,2026-03-02T00:00:05Z\n")
    assert main(argv, spark=spark) == 0, f"{page}: {line}"
    said = capsys.readouterr()
    assert said.out.strip(), f"{page}: {line} printed nothing"
    assert "Traceback" not in said.err, said.err
    for head, check in SAYS.items():
        if " ".join(_words(line)).startswith(head):
            check(said.out)


def test_each_line_said_is_run() -> None:
    """A line :data:`SAYS` checks is one of the lines run."""
    run = [" ".join(_words(line)) for _, _, line in _distinct(_command_lines())]
    for head in SAYS:
        assert any(text.startswith(head) for text in run), head
