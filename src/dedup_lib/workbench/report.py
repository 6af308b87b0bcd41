"""Headless postmortem: run the postmortem notebook (``notebooks/04_incident_postmortem.ipynb``,
shipped in the package) with papermill, and write it as one self-contained HTML file (charts
inlined, readable offline)."""

from __future__ import annotations

import re
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING

from dedup_lib.analysis.tables import ALL_ENTITIES
from dedup_lib.errors import MissingFileError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

#: The postmortem notebook, shipped inside the package (``notebooks/`` in the source tree).
POSTMORTEM = files("dedup_lib") / "resources" / "postmortem.ipynb"


def run_postmortem(
    input: str,
    *,
    window: str = "PT10M",
    partitioning: bool = False,
    entity: str = ALL_ENTITIES,
    start: str | None = None,
    end: str | None = None,
    out_dir: str = "reports",
    notebook: Traversable | Path = POSTMORTEM,
) -> Path:
    """Execute the postmortem notebook with these parameters; return the HTML report's path."""
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter

    source = Path(input).resolve()
    if not source.exists():
        raise MissingFileError(f"postmortem: {input} does not exist")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^\w.-]+", "-", source.name.split(".")[0])
    label = re.sub(r"[^\w]+", "", window)
    name = f"postmortem-{stem}-{label}" + ("-partitioned" if partitioning else "")
    executed = out / f"{name}.ipynb"
    with as_file(notebook) as path:
        pm.execute_notebook(
            str(path),
            str(executed),
            parameters={
                "INPUT": str(source),
                "WINDOW": window,
                "PARTITIONING": partitioning,
                "ENTITY": entity,
                "START": start,
                "END": end,
                "EMBED_CHARTS": True,
            },
            cwd=str(out),
            progress_bar=False,
            kernel_name="python3",
        )
    settings = {"exclude_input": True, "exclude_input_prompt": True, "exclude_output_prompt": True}
    exporter = HTMLExporter(**settings)  # type: ignore[no-untyped-call]
    notebook_node = nbformat.read(executed, as_version=4)  # type: ignore[no-untyped-call]
    html, _ = exporter.from_notebook_node(notebook_node)
    # The template loads require.js and MathJax from a CDN. Offline they fail; online,
    # require.js would make plotly.js register as an AMD module instead of window.Plotly.
    # The report needs neither.
    html = re.sub(r'<script[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>', "", html)
    report = out / f"{name}.html"
    report.write_text(html, encoding="utf-8")
    return report
