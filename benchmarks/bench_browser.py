"""Benchmark: the window explorer as a user waits for it, measured in Chromium.

Starts JupyterLab on a copy of notebooks/ (as the browser tests do), opens notebook 02 and
measures, in the browser:

- time to first chart: from Run All to the explorer's first plotly chart drawn with traces
  (Spark's start, loading and the explorer's build included);
- redraw: from a control change (window slider dragged, window typed, partitioning toggled,
  entity picked) to the explorer's output settled: the last change to it, once nothing has
  moved for a second, seen by a MutationObserver started just before the change.

After the first chart the kernel is interrupted (the notebook's later cells would keep it
busy, and widget changes wait for it). With ``--rows``, N sends of the day scenario are
generated with ``dedup-lib generate`` into a temporary folder and given to the notebook in
``DEDUP_INPUT``; without, it reads the 200 k-send sample. Targets (issue 18): first chart
within 15 s on the sample; a redraw under 0.3 s on the sample, under 1 s on 10 M sends.

    make bench-browser                      # the 200 k sample
    make bench-browser ROWS=10000000        # 10 M generated sends
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lab_kit import CHROMIUM, EXPLORER, Lab, Notebook, control, drag, explorer_cell

# Records the time of every change inside the explorer's output, from a mark set just before
# a control is moved; the controls themselves are left out (their own echo is not a redraw).
WATCH_JS = """cell => {
    const out = cell.querySelector('.jp-Cell-outputWrapper');
    window.__bench = {start: performance.now(), last: null, charts: 0};
    if (window.__benchObserver) window.__benchObserver.disconnect();
    window.__benchObserver = new MutationObserver(records => {
        const now = performance.now();
        for (const r of records) {
            const node = r.target.nodeType === 1 ? r.target : r.target.parentElement;
            if (node && node.closest('.widget-inline-hbox')) continue;
            window.__bench.last = now;
            if (node && node.closest('.js-plotly-plot')) window.__bench.charts += 1;
        }
    });
    window.__benchObserver.observe(out, {subtree: true, childList: true, attributes: true,
                                         characterData: true});
}"""
FIRST_CHART_JS = """() => {
    const label = [...document.querySelectorAll('label.widget-label')]
        .find(l => l.textContent.trim() === 'or type');
    const cell = label && label.closest('.jp-CodeCell');
    return !!(cell && [...cell.querySelectorAll('.js-plotly-plot')]
        .some(p => p.querySelector('.trace, .bars, .point')));
}"""


def redraw_seconds(explorer: Any, page: Any, change: Any, quiet: float = 1.0) -> float:
    """Seconds from just before ``change()`` to the last change in the explorer's output."""
    explorer.evaluate(WATCH_JS)
    change()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        page.wait_for_timeout(250)
        bench = page.evaluate("() => ({...window.__bench, now: performance.now()})")
        if (
            bench["last"] is not None
            and bench["charts"]
            and bench["now"] - bench["last"] > quiet * 1000
        ):
            return float(bench["last"] - bench["start"]) / 1000
    raise RuntimeError("the explorer did not redraw within 120 s")


def measure(browser: Any, workdir: Path, env: dict[str, str]) -> dict[str, Any]:
    lab = Lab.start(workdir, env)
    try:
        notebook = Notebook.open(browser, lab, EXPLORER)
        page = notebook.page
        start = time.perf_counter()
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_function(FIRST_CHART_JS, timeout=900_000, polling=100)
        first_chart = time.perf_counter() - start
        print(f"first chart after Run All: {first_chart:.2f} s", file=sys.stderr, flush=True)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
        page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
            " === 'idle'",
            timeout=120_000,
        )
        page.wait_for_timeout(2000)
        cell = explorer_cell(page)
        cell.scroll_into_view_if_needed()

        def slider(dx: float) -> None:
            drag(page, control(cell, "window").locator(".noUi-handle").first, dx)

        def typed(window: str) -> None:
            box = control(cell, "or type").locator("input")
            box.fill(window)
            box.press("Enter")

        def mode(name: str) -> None:
            control(cell, "partitioning").get_by_role("button", name=name).click()

        def entity(name: str) -> None:
            control(cell, "entity").locator("select").select_option(name)

        changes = {
            "slider dragged": lambda: slider(50),
            "window typed PT1H": lambda: typed("PT1H"),
            "slider dragged back": lambda: slider(-80),
            "window typed PT10M": lambda: typed("PT10M"),
            "partitioning enabled": lambda: mode("enabled"),
            "partitioning disabled": lambda: mode("disabled"),
            "entity orders": lambda: entity("orders"),
            "entity payments": lambda: entity("payments"),
            "entity (all)": lambda: entity("(all)"),
        }
        redraws = {name: redraw_seconds(cell, page, change) for name, change in changes.items()}
        console = list(notebook.console)
        notebook.close()
    finally:
        lab.stop()
    times = list(redraws.values())
    return {
        "first chart after Run All, s": first_chart,
        "redraw median, s": statistics.median(times),
        "redraw max, s": max(times),
        "redraws, s": redraws,
        "console errors": console,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help="generate this many sends (default: the sample)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="dedup-bench-browser-") as tmp, sync_playwright() as p:
        env: dict[str, str] = {}
        if args.rows:
            sends = Path(tmp) / "sends"
            subprocess.run(
                [sys.executable, "-m", "dedup_lib", "generate", str(sends), "--rows",
                 str(args.rows), "--seed", "1", "--quiet"],
                check=True,
            )  # fmt: skip
            env["DEDUP_INPUT"] = str(sends)
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        figures = measure(browser, Path(tmp), env)
        browser.close()
    size = f"{args.rows:,} generated sends" if args.rows else "the 200 k-send sample"
    print(f"\nnotebook 02 in Chromium, {size}")
    print(f"{'first chart after Run All':32s} {figures['first chart after Run All, s']:7.2f} s")
    for name, value in figures["redraws, s"].items():
        print(f"redraw: {name:24s} {value:7.2f} s")
    print(f"{'redraw median':32s} {figures['redraw median, s']:7.2f} s")
    print(f"{'redraw max':32s} {figures['redraw max, s']:7.2f} s")
    for error in figures["console errors"]:
        print(f"console: {error}")
    if args.json:
        args.json.write_text(json.dumps({"rows": args.rows or 200_000, **figures}, indent=2))
    limit = 1.0 if args.rows and args.rows > 200_000 else 0.3
    first_ok = args.rows is not None or figures["first chart after Run All, s"] <= 15
    return 0 if figures["redraw max, s"] < limit and first_ok else 1


if __name__ == "__main__":
    sys.exit(main())
