"""Headless postmortem: run the postmortem notebook (``notebooks/04_incident_postmortem.ipynb``,
shipped in the package) with papermill, and write it as one self-contained HTML file (charts
inlined, readable offline). A cell that fails raises the same one-line error the library
would outside the notebook. The report is for a reader who will not run it: its code, and the
cells tagged ``notebook-only`` (how to run it), are left out, and its page title is the one
the notebook names (entity, window, time range)."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dedup_lib.analysis.totals import ALL_ENTITIES
from dedup_lib.errors import DedupLibError, InputError, MissingFileError
from dedup_lib.spark import log_error, output_to, spark_log_path, spark_message
from dedup_lib.workbench import csp

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from importlib.resources.abc import Traversable

    from dedup_lib.telemetry.files import PathText


class ReportError(DedupLibError, RuntimeError):
    """The postmortem notebook failed in a cell, not on the input: the message names the
    error, its traceback is in Spark's log."""


_E = TypeVar("_E", bound=BaseException)


def _by_name(base: type[_E]) -> dict[str, type[_E]]:
    """``base`` and every class below it, by name, as a notebook cell's failure names its
    error (the nearest to ``base`` first when two share a name)."""
    found: dict[str, type[_E]] = {}
    pending: list[type[_E]] = [base]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    return found


#: A cell's traceback shows a Spark error as the cause: the command line then names Spark's
#: log after the library's message, as it does outside the notebook.
_SPARK_CAUSE = re.compile(r"\bPy4J\w*Error\b|\bpyspark\.errors\b|\bpyspark/errors/")


def _is_spark_error(name: str) -> bool:
    from pyspark.errors import PySparkException

    return name in _by_name(PySparkException) or name.startswith("Py4J")


def cell_error(failure: Any, source: str = "", input: str = "") -> DedupLibError:
    """The library's error for a papermill ``PapermillExecutionError``: one of the library's
    own errors raised again with its message (and where Spark's log is when a Spark error
    caused it); anything else a :class:`ReportError` of one
    line, with the cell's traceback written to Spark's log. The notebook's ``source`` path
    is written as the user named it (``input``), as outside the notebook."""
    ename, evalue = str(failure.ename), str(failure.evalue)
    if source and input:
        evalue = re.sub(rf"(?<![\w:/]){re.escape(source)}", lambda _: input, evalue)
    log = spark_log_path()
    trace = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(failure.traceback))
    cls = _by_name(DedupLibError).get(ename)
    if cls is not None:
        if _SPARK_CAUSE.search(trace):
            evalue += f" (Spark's log: {log})"
        try:
            return cls(evalue)
        except TypeError:
            return InputError(evalue)
    log_error(f"postmortem notebook: {ename}: {evalue}", trace)
    if _is_spark_error(ename):
        return ReportError(f"{spark_message(evalue or ename)} (Spark's log: {log})")
    first = evalue.strip().splitlines()[0] if evalue.strip() else ""
    return ReportError(f"the postmortem notebook failed: {ename}: {first} (details: {log})")


#: The postmortem notebook, shipped inside the package (``notebooks/`` in the source tree).
POSTMORTEM = files("dedup_lib") / "resources" / "postmortem.ipynb"
#: Cells with this tag speak to whoever runs the notebook; the report leaves them out.
NOTEBOOK_ONLY = "notebook-only"
#: The key of the output metadata in which the notebook names the report's title.
TITLE_KEY = "dedup_lib"


def _said(notebook: Any) -> list[dict[str, Any]]:
    """What the cells of the executed ``notebook`` said to the report in their outputs'
    metadata (``{"dedup_lib": {...}}``), in cell order."""
    return [
        output.get("metadata", {}).get(TITLE_KEY, {})
        for cell in notebook.cells
        for output in cell.get("outputs", [])
    ]


def report_title(notebook: Any, default: str) -> str:
    """The title a cell of the executed ``notebook`` gave in its output's metadata
    (``{"dedup_lib": {"title": ...}}``), else ``default``."""
    titles = [str(said["title"]) for said in _said(notebook) if said.get("title")]
    return titles[0] if titles else default


def protected(html: str, notebook: Any, exporter: Any) -> str:
    """The report with its Content-Security-Policy (:mod:`dedup_lib.workbench.csp`): it runs
    the scripts the notebook's charts listed as theirs and those of the HTML template (those
    of a notebook without cells), nothing else. A script that is neither is an error: the
    report is not written with it."""
    import nbformat

    empty, _ = exporter.from_notebook_node(nbformat.v4.new_notebook())  # type: ignore[no-untyped-call]
    allowed = set(csp.script_hashes(_without_cdn(empty)))
    allowed.update(h for said in _said(notebook) for h in said.get(csp.META, []))
    try:
        return csp.with_policy(html, allowed)
    except ValueError as exc:
        raise ReportError(f"the report is not written: {exc}") from None


def _without_cdn(html: str) -> str:
    """``html`` without the scripts the template loads from a CDN. Offline they fail; online,
    require.js would make plotly.js register as an AMD module instead of window.Plotly. The
    report needs neither."""
    return re.sub(r'<script[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>', "", html)


@dataclass(frozen=True)
class KeptExport:
    """An export of what the broker kept (Service Bus Explorer's), for the postmortem to
    check its replay against (:func:`dedup_lib.reconcile`).

    Parameters
    ----------
    path : str or os.PathLike
        The export: a file or folder.
    format : str, optional
        Its format (None: recognised from its content).
    mapping : Mapping[str, str], optional
        Its column names to the canonical ones (``{"Enqueued": "send_time"}``), as
        :func:`dedup_lib.load_telemetry` takes them.

    Examples
    --------
    >>> from dedup_lib import KeptExport
    >>> KeptExport("incident-kept/orders.json.gz")
    KeptExport(path='incident-kept/orders.json.gz', format=None, mapping=None)
    """

    path: PathText
    format: str | None = None
    mapping: Mapping[str, str] | None = None


@dataclass(frozen=True)
class PostmortemOptions:
    """How :func:`dedup_lib.run_postmortem` reads the telemetry, and what it checks its
    replay against.

    Parameters
    ----------
    format : str, optional
        The telemetry's format, as :func:`dedup_lib.load_telemetry` takes it (None:
        recognised).
    mapping : Mapping[str, str], optional
        Your column names to the canonical ones (``{"Id": "message_id"}``).
    content : sequence of str, optional
        The columns that say what a message carries (None: ``payload_hash``, if any).
    kept : KeptExport, optional
        What the broker kept, to check the replay against (None: no check).

    Examples
    --------
    >>> from dedup_lib import KeptExport, PostmortemOptions
    >>> options = PostmortemOptions(content=["payload_hash"], kept=KeptExport("kept.json"))
    >>> options.kept.path, options.format
    ('kept.json', None)
    """

    format: str | None = None
    mapping: Mapping[str, str] | None = None
    content: Sequence[str] | None = None
    kept: KeptExport | None = None


def run_postmortem(
    input: PathText,
    *,
    window: str = "PT10M",
    partitioning: bool = False,
    entity: str = ALL_ENTITIES,
    start: str | None = None,
    end: str | None = None,
    out_dir: PathText = "reports",
    notebook: Traversable | Path = POSTMORTEM,
    options: PostmortemOptions | None = None,
) -> Path:
    """Run the postmortem notebook headless and write its HTML report.

    Parameters
    ----------
    input : str or os.PathLike
        The telemetry, as :func:`dedup_lib.load_telemetry` reads it.
    window : str, default "PT10M"
        The window replayed.
    partitioning : bool, default False
        Whether the entity is partitioned.
    entity : str, default "(all)"
        One entity, or every one.
    start, end : str, optional
        The incident's span (ISO 8601, UTC without offset).
    out_dir : str or os.PathLike, default "reports"
        Where the report is written.
    notebook : Traversable or Path, optional
        The notebook run (default: the workbench's notebook 04, shipped in the package).
    options : PostmortemOptions, optional
        How the telemetry is read (``format``, ``mapping``, ``content``) and the export of
        what the broker kept to check the replay against (``kept``); None: every default.

    Returns
    -------
    Path
        The HTML report, named for the input, the entity and the window.

    Raises
    ------
    InputError
        A parameter the notebook refuses; the notebook's own error, named, where a cell
        fails.

    Examples
    --------
    The workbench's postmortem takes about a minute (``tests/test_wheel.py`` runs it from
    an installed wheel and checks the report); here a notebook of two cells shows what
    any notebook run receives and where its report lands:

    >>> import re
    >>> from pathlib import Path
    >>> import nbformat
    >>> from dedup_lib import run_postmortem
    >>> _ = Path("sends.csv").write_text("message_id,send_time\\norder-1,2026-11-03T20:00:00Z\\n")
    >>> parameters = nbformat.v4.new_code_cell("INPUT = WINDOW = None")
    >>> parameters.metadata["tags"] = ["parameters"]
    >>> shown = nbformat.v4.new_code_cell("import os; print(os.path.basename(INPUT), WINDOW)")
    >>> notebook = nbformat.v4.new_notebook(cells=[parameters, shown])
    >>> notebook.metadata["language_info"] = {"name": "python"}
    >>> nbformat.write(notebook, "tiny.ipynb")
    >>> report = run_postmortem("sends.csv", window="PT1H", notebook=Path("tiny.ipynb"))
    >>> report.relative_to(Path.cwd())
    PosixPath('reports/postmortem-sends-PT1H.html')
    >>> re.findall("sends.csv [A-Z0-9]+", report.read_text())
    ['sends.csv PT1H']
    """
    options = options if options is not None else PostmortemOptions()
    input = os.fspath(input)
    source = Path(input).resolve()
    if not source.exists():
        raise MissingFileError(f"postmortem: {input} does not exist")
    kept = options.kept
    kept_path = Path(kept.path).resolve() if kept is not None else None
    if kept is not None and kept_path is not None and not kept_path.exists():
        raise MissingFileError(f"postmortem: {os.fspath(kept.path)} does not exist")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^\w.-]+", "-", source.name.split(".")[0])
    label = re.sub(r"[^\w]+", "", window)
    name = f"postmortem-{stem}-{label}" + ("-partitioned" if partitioning else "")
    parameters = {
        "INPUT": str(source),
        "WINDOW": window,
        "PARTITIONING": partitioning,
        "ENTITY": entity,
        "START": start,
        "END": end,
        "EMBED_CHARTS": True,
        "KEPT": str(kept_path) if kept_path is not None else None,
        "KEPT_FORMAT": kept.format if kept is not None else None,
        "KEPT_MAPPING": dict(kept.mapping) if kept is not None and kept.mapping else None,
        "FORMAT": options.format,
        "MAPPING": dict(options.mapping) if options.mapping is not None else None,
        "CONTENT": list(options.content) if options.content is not None else None,
    }
    executed = out / f"{name}.ipynb"
    _execute(notebook, executed, parameters, input)
    report = out / f"{name}.html"
    report.write_text(_html(executed, name), encoding="utf-8")
    return report


def _execute(
    notebook: Traversable | Path, executed: Path, parameters: dict[str, Any], input: str
) -> None:
    """``notebook`` run by papermill with ``parameters`` into ``executed``, in its folder, with
    Spark's log to its file; a failing cell is an error that says which and why."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    log = spark_log_path()
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        quiet: contextlib.AbstractContextManager[None] = output_to(log)
    except OSError:
        quiet = contextlib.nullcontext()
    with as_file(notebook) as path, quiet:
        try:
            pm.execute_notebook(
                str(path),
                str(executed),
                parameters=parameters,
                cwd=str(executed.parent),
                progress_bar=False,
                kernel_name="python3",
            )
        except PapermillExecutionError as failure:
            raise cell_error(failure, parameters["INPUT"], input) from None


def _html(executed: Path, name: str) -> str:
    """The executed notebook as the report: outputs only, no cell marked notebook-only, under
    the title a cell gave, with its Content-Security-Policy."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    settings = {"exclude_input": True, "exclude_input_prompt": True, "exclude_output_prompt": True}
    exporter = HTMLExporter(**settings)  # type: ignore[no-untyped-call]
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_cell_tags={NOTEBOOK_ONLY}),  # type: ignore[no-untyped-call]
        enabled=True,
    )
    notebook_node = nbformat.read(executed, as_version=4)  # type: ignore[no-untyped-call]
    notebook_node.metadata["title"] = report_title(notebook_node, f"Incident postmortem: {name}")
    html, _ = exporter.from_notebook_node(notebook_node)
    return protected(_without_cdn(html), notebook_node, exporter)
