"""Benchmark: the window explorer as a user waits for it, measured in Chromium.

Starts JupyterLab on a copy of notebooks/ (as the browser tests do), opens notebook 02 and
measures, in the browser:

- time to first chart: from Run All to the explorer's first plotly chart drawn with traces
  (Spark's start, loading and the explorer's build included);
- redraw: from a control change (window slider dragged, window typed, partitioning toggled,
  entity picked) to the explorer's output settled: the last change to it, once nothing has
  moved for a second, seen by a MutationObserver started as the user commits the change (lets
  go of the mouse, presses Enter, clicks), so the time spent moving the mouse is not counted.

After the first chart the rest of the notebook runs (a widget change waits for the kernel)
and the explorer prepares its other partitioning mode; redraws are timed once both are done.
With ``--rows``, N sends of the day scenario are generated with ``dedup-lib generate`` into a
temporary folder and given to the notebook as its ``INPUT`` parameter (set as papermill sets
it); without, it reads the 200 k-send sample. Targets (issue 18): first chart within 15 s on
the sample; a redraw under 0.3 s on the sample, under 1 s on 10 M sends.

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from lab_kit import CHROMIUM, DONE_JS, EXPLORER, Lab, Notebook, control, drag, explorer_cell
from results_table import Figure, add_option, record, short_count

# Records the time of every change inside the explorer's output, from a mark set just before
# a control is moved; the controls themselves are left out (their own echo is not a redraw).
WATCH_JS = """cell => {
    const out = cell.querySelector('.jp-Cell-outputWrapper');
    window.__bench = {start: null, last: null, charts: 0};
    if (window.__benchObserver) window.__benchObserver.disconnect();
    (window.__benchActs || []).forEach(([t, f]) => document.removeEventListener(t, f, true));
    const act = event => {
        if (event.type === 'keydown' && event.key !== 'Enter') return;
        if (window.__bench.start === null) window.__bench.start = performance.now();
    };
    window.__benchActs = ['keydown', 'mouseup', 'change'].map(t => [t, act]);
    window.__benchActs.forEach(([t, f]) => document.addEventListener(t, f, true));
    // Looks only as far as the first record that answers each question: a redraw makes
    // thousands of records, and a look at each would slow the redraw being measured.
    const element = r => r.target.nodeType === 1 ? r.target : r.target.parentElement;
    const within = (r, selector) => {
        const node = element(r);
        return !!(node && node.closest(selector));
    };
    window.__benchObserver = new MutationObserver(records => {
        if (records.every(r => within(r, '.widget-inline-hbox'))) return;
        window.__bench.last = performance.now();
        if (!window.__bench.charts && records.some(r => within(r, '.js-plotly-plot'))) {
            window.__bench.charts += 1;
        }
    });
    window.__benchObserver.observe(out, {subtree: true, childList: true, attributes: true,
                                         characterData: true});
}"""
PREPARED_JS = """() => !document.body.innerText.includes('being prepared')
    && [...document.querySelectorAll('.jp-CodeCell button')].some(
        b => b.textContent.trim() === 'enabled')"""
#: A control change: called with ``start``, which it calls just before the committing act.
Change = Callable[[Callable[[], Any]], None]
FIRST_CHART_JS = """() => {
    const label = [...document.querySelectorAll('label.widget-label')]
        .find(l => l.textContent.trim() === 'or type');
    const cell = label && label.closest('.jp-CodeCell');
    return !!(cell && [...cell.querySelectorAll('.js-plotly-plot')]
        .some(p => p.querySelector('.trace, .bars, .point')));
}"""


def redraw_seconds(explorer: Any, page: Any, change: Any, quiet: float = 1.0) -> float:
    """Seconds from the user's committing act, as the page's own event (the mouse let go,
    Enter pressed, an option picked; ``change`` calls ``start`` before it, to arm the
    watch), to the last change in the explorer's output."""
    change(lambda: explorer.evaluate(WATCH_JS))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        page.wait_for_timeout(250)
        bench = page.evaluate("() => ({...window.__bench, now: performance.now()})")
        if (
            bench["last"] is not None
            and bench["start"] is not None
            and bench["charts"]
            and bench["now"] - bench["last"] > quiet * 1000
        ):
            return float(bench["last"] - bench["start"]) / 1000
    raise RuntimeError("the explorer did not redraw within 120 s")


def measure(browser: Any, workdir: Path, parameters: dict[str, Any]) -> dict[str, Any]:
    lab = Lab.start(workdir)
    try:
        name = lab.parameterized(EXPLORER, parameters, "bench") if parameters else EXPLORER
        notebook = Notebook.open(browser, lab, name)
        page = notebook.page
        start = time.perf_counter()
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_function(FIRST_CHART_JS, timeout=900_000, polling=100)
        first_chart = time.perf_counter() - start
        print(f"first chart after Run All: {first_chart:.2f} s", file=sys.stderr, flush=True)
        # The rest of the notebook runs on (a change waits for the kernel), and the other
        # partitioning mode is built in the background: redraws are timed once both are done.
        page.wait_for_function(DONE_JS, timeout=3_600_000, polling=500)
        page.wait_for_function(PREPARED_JS, timeout=600_000, polling=500)
        page.wait_for_timeout(1000)
        cell = explorer_cell(page)
        cell.scroll_into_view_if_needed()

        def slider(dx: float) -> Change:
            handle = control(cell, "window").locator(".noUi-handle").first
            return lambda start: drag(page, handle, dx, before_release=start)

        def typed(window: str) -> Change:
            def change(start: Callable[[], Any]) -> None:
                box = control(cell, "or type").locator("input")
                box.fill(window)
                start()
                box.press("Enter")

            return change

        def mode(name: str) -> Change:
            def change(start: Callable[[], Any]) -> None:
                start()
                control(cell, "partitioning").get_by_role("button", name=name).click()

            return change

        def entity(name: str) -> Change:
            def change(start: Callable[[], Any]) -> None:
                start()
                control(cell, "entity").locator("select").select_option(name)

            return change

        changes = {
            "slider dragged": slider(50),
            "window typed PT1H": typed("PT1H"),
            "slider dragged back": slider(-80),
            "window typed PT10M": typed("PT10M"),
            "partitioning enabled": mode("enabled"),
            "partitioning disabled": mode("disabled"),
            "entity orders": entity("orders"),
            "entity payments": entity("payments"),
            "entity (all)": entity("(all)"),
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
    add_option(parser)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="dedup-bench-browser-") as tmp, sync_playwright() as p:
        parameters: dict[str, Any] = {}
        if args.rows:
            sends = Path(tmp) / "sends"
            subprocess.run(
                [sys.executable, "-m", "dedup_lib", "generate", str(sends), "--rows",
                 str(args.rows), "--seed", "1", "--quiet"],
                check=True,
            )  # fmt: skip
            parameters["INPUT"] = str(sends)
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        figures = measure(browser, Path(tmp), parameters)
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
    first, worst = figures["first chart after Run All, s"], figures["redraw max, s"]
    rows = [
        Figure("first chart after Run All", None, f"{first:.1f} s")
        if args.rows
        else Figure("first chart after Run All", None, f"{first:.1f} s", "within 15 s", first_ok),
        Figure(
            "redraw, worst of 9",
            None,
            f"{worst:.2f} s (median {figures['redraw median, s']:.2f} s)",
            f"under {limit:g} s",
            worst < limit,
        ),
    ]
    size = f"{short_count(args.rows)} sends" if args.rows else "the 200 k sample"
    record(
        "make bench-browser",
        size,
        rows,
        baseline="nothing: absolute times, what a user waits",
        enabled=not args.no_record,
    )
    return 0 if worst < limit and first_ok else 1


if __name__ == "__main__":
    sys.exit(main())
