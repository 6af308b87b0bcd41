"""Every notebook on telemetry shaped as analysts have it (``user_corpus``), run as a user runs
it headless: papermill, ``INPUT`` and the parameters the input needs.

Each cell must run without error, and write nothing to stderr and no Spark or Java log text
anywhere (that goes to Spark's log file, which the kernel's Spark must have written); where
the input lacks ground truth or content, the notebook
must say so in words and show no table of the figures it cannot know; and what it showed must
be what the library's own calls give on the same data: a cell appended to each notebook, run in
its kernel after the others, computes those calls independently (the engine where the
notebook used the explorer's caches) and compares. The notebooks of an input run one
after the other (see :func:`_combined`), and every input in the same kernel, as an analyst
points one kernel at file after file: the kernel of JupyterLab that the browser tests run the
samples in (``lab``, ``kernel``), so one Spark start for those and these. Its Spark is its own
local one, as a user's kernel starts, whatever session the tests hold.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest

from codegen_kit import COMPILED, INTERPRETED, in_kernel
from lab_kit import FORGET, LOG_TEXT, NOTEBOOKS, ROOT, Lab
from user_corpus import UserInput, write_user_corpus

pytestmark = pytest.mark.spark

#: Appended to each notebook: its figures against the library's own calls on the same data.
CHECKS = {
    "01_load_telemetry.ipynb": """
_counts = loaded.counts()
assert _counts["read"] == _counts["valid"] + _counts["quarantined"] + _counts["skipped"], _counts
assert _counts["valid"] == sends.count()
""",
    "02_window_explorer.ipynb": """
from dedup_lib import DedupPolicy as _Policy, detect_duplicates as _replay, summarize as _sum
_numbers = dict(view.numbers.itertuples(index=False))
for _mode, _name in ((False, "disabled"), (True, "enabled")):
    _total = _sum(_replay(sends, _Policy(WINDOW, partitioning=_mode))).iloc[-1]
    _shown = findings.partitioning_effect(explorer.caches, WINDOW, evidence).tables[0]
    _shown = _shown.set_index(_shown.columns[0])
    assert _shown.loc["duplicates", _name] == _total.duplicates, (_shown, _total)
    assert _shown.loc["rejected", _name] == _total.rejected, (_shown, _total)
    if not _mode:
        assert _numbers["dropped as duplicates"] == f"{_total.duplicates:,}", _numbers
        assert _numbers["rejected"] == f"{_total.rejected:,}", _numbers
""",
    "03_window_sizing.ipynb": """
from dedup_lib import DedupPolicy as _Policy, detect_duplicates as _replay, summarize as _sum
_row = sizing.sweeps[False].iloc[20]
_total = _sum(_replay(sends, _Policy(_row.window_s))).iloc[-1]
assert int(_row.duplicates) == int(_total.duplicates), (_row, _total)
if not caches[False].has_ground_truth:
    assert sizing.picks == {}
""",
    "04_incident_postmortem.ipynb": """
from dedup_lib import detect_duplicates as _replay, missed_resends as _missed
from dedup_lib.analysis.selection import narrow as _narrow
from dedup_lib import summarize as _sum
_total = _sum(_replay(sends, policy)).iloc[-1]
assert incident.verdicts().tables[0].iloc[-1]["duplicates"] == _total.duplicates
if incident.evidence.has("content"):
    _again = _narrow(_missed(_replay(sends, policy)), ENTITY, START, END).count()
    assert f"**{_again:,} resends reached consumers again**" in incident.summary()
""",
    "05_live_monitor.ipynb": """
if monitor.watch is not None:
    _lines = monitor.watch.lines
    assert _lines and sum(_l.judged for _l in _lines) > 0, "no verdict drawn"
    assert int(monitor.figures()[0].data[0].y.sum()) > 0, "the chart draws no send"
    assert not monitor.watch.active
""",
}
#: What each notebook must say on an input, beyond that it has no ground truth or content.
SAID = {
    "minimal": {
        "01_load_telemetry.ipynb": ["No row was quarantined", "Left out: the tour reads"],
        "02_window_explorer.ipynb": [
            "no partition_key or session_id column",
            "No entity settings were given",
        ],
        "03_window_sizing.ipynb": ["no window is picked"],
        "04_incident_postmortem.ipynb": ["No export of what the broker kept"],
    },
    "app-insights": {"05_live_monitor.ipynb": ["Not watching", "cannot be watched"]},
}
#: What a notebook says where the input lacks ground truth, or content.
NO_TRUTH = "no ground truth"
NO_CONTENT = "no content to compare"
#: Columns of figures only ground truth gives.
TRUTH_FIGURES = ("resends_caught", "extra_deliveries", "messages_lost")


@pytest.fixture(scope="session")
def user_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, UserInput]:
    return {u.name: u for u in write_user_corpus(tmp_path_factory.mktemp("user-corpus"))}


#: The notebooks an input runs, where not all of them: a file format is the loader's concern
#: (notebook 01 reads it, 04 replays and reports it, 05 watches it or says it cannot); after
#: the load its sends are like any other's, which the explorer's and the sweep's notebooks
#: (02, 03) take on the inputs of other shapes.
FORMAT_NOTEBOOKS = [
    "01_load_telemetry.ipynb",
    "04_incident_postmortem.ipynb",
    "05_live_monitor.ipynb",
]
ONLY = {
    name: FORMAT_NOTEBOOKS for name in ("otlp", "app-insights", "Azure SDK names and a mapping")
}
#: The inputs.
NAMES = [
    "minimal",
    "day without truth or content",
    "otlp",
    "app-insights",
    "Azure SDK names and a mapping",
    "one entity with 300 sends",
    "a week",
    "an entity without any resend",
]


def _said(cells: list[Any]) -> str:
    """The cells' outputs as text: their sentences and their tables."""
    texts = []
    for cell in cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/markdown" in data:
                texts.append(data["text/markdown"].replace("`", ""))  # as it renders
            page = data.get("text/html", "")
            if "<table" in page:
                # a label's line breaks (<wbr>) are no space: "resends_caught" reads whole
                texts.append(html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<wbr/?>", "", page))))
    return " ".join(texts)


def _combined(given: UserInput) -> Any:
    """The notebooks as one, each with its parameters set as papermill sets them, its
    check appended, and the previous notebook's names forgotten before it (:data:`FORGET`):
    one kernel and one Spark for all of them, at a fraction of the starts. Each cell says which
    notebook it came from. An input of :data:`ONLY` runs the notebooks it names."""
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    combined = nbformat.v4.new_notebook(metadata={"kernelspec": kernel})
    for notebook in ONLY.get(given.name, NOTEBOOKS):
        part = load_notebook_node(str(ROOT / "notebooks" / notebook))
        part = parameterize_notebook(part, given.notebook_parameters())
        cells = [nbformat.v4.new_code_cell(FORGET), *part.cells]
        cells.append(nbformat.v4.new_code_cell(CHECKS[notebook].strip()))
        for cell in cells:
            cell.metadata["dedup_notebook"] = notebook
        combined.cells += cells
    return combined


@pytest.fixture(scope="module")
def interpreted(lab: Lab, kernel: str) -> Iterator[None]:
    """The kernel's Spark evaluates expressions interpreted for these inputs of tens to
    thousands of rows (:mod:`codegen_kit`), and compiled again after."""
    lab.reset(kernel)
    lab.run(kernel, in_kernel(INTERPRETED))
    try:
        yield
    finally:
        lab.run(kernel, in_kernel(COMPILED))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.usefixtures("interpreted")
def test_every_notebook_runs_on_the_analysts_own_data(
    user_corpus: dict[str, UserInput], name: str, lab: Lab, kernel: str
) -> None:
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    given = user_corpus[name]
    executed = _combined(given)
    try:
        NotebookClient(executed, km=lab.manager(kernel), timeout=900).execute()
    except CellExecutionError as failure:
        where = next((c.metadata.get("dedup_notebook") for c in executed.cells if _failed(c)), "?")
        pytest.fail(f"{where} on {name}: {failure.ename}: {failure.evalue}", pytrace=False)
    _nothing_on_stderr_nor_log_text(executed, name)
    assert (lab.kernel_log / "spark.log").is_file(), "the kernel's Spark logged nowhere"
    for notebook in ONLY.get(name, NOTEBOOKS):
        cells = [c for c in executed.cells if c.metadata.get("dedup_notebook") == notebook]
        text = _said(cells)
        _says_what_it_cannot_tell(notebook, given, text)
        missing = [words for words in SAID.get(name, {}).get(notebook, []) if words not in text]
        assert not missing, f"{notebook} on {name} does not say: {missing}"


def _nothing_on_stderr_nor_log_text(executed: Any, name: str) -> None:
    """No cell wrote to stderr, and no output carries Spark's or Java's log text."""
    found = []
    for cell in executed.cells:
        where = cell.metadata.get("dedup_notebook")
        for output in cell.get("outputs", []):
            if output.get("name") == "stderr":
                found.append(f"{where}: stderr: {''.join(output.get('text', ''))[:300]}")
            for value in [output.get("text", ""), *output.get("data", {}).values()]:
                if LOG_TEXT.search(str(value)):
                    found.append(f"{where}: log text: {str(value)[:300]}")
    assert not found, f"on {name}:\n" + "\n".join(found)


def _failed(cell: Any) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs", []))


def _says_what_it_cannot_tell(notebook: str, given: UserInput, text: str) -> None:
    """Where the input lacks ground truth or content, the notebook says so, and shows none
    of the figures only they give."""
    if notebook == "01_load_telemetry.ipynb":
        return
    if not given.ground_truth and notebook != "05_live_monitor.ipynb":
        assert NO_TRUTH in text, f"{notebook} on {given.name} does not say it has no ground truth"
        shown = [f for f in TRUTH_FIGURES if f in text]
        assert not shown, f"{notebook} shows {shown} on {given.name}, which has no ground truth"
    if notebook == "03_window_sizing.ipynb" or "Not watching" in text:
        return
    if given.content:
        assert NO_CONTENT not in text, f"{notebook} on {given.name} says it has no content"
    else:
        assert NO_CONTENT in text, f"{notebook} on {given.name} does not say it has no content"
