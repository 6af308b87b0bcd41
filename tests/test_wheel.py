"""The wheel works outside the checkout: built, installed into a fresh venv in a temporary
folder, and run from there on the samples it ships (no path into this source tree)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dedup_lib.class_data import SWITCH
from report_kit import KEPT, NAME, WINDOW, check_incident_report

ROOT = Path(__file__).resolve().parents[1]
#: What the wheel is built from: the package, the files it links to, the metadata.
SOURCES = ("pyproject.toml", "README.md", "src", "data/samples", "notebooks")
JUNK = shutil.ignore_patterns("*.egg-info", "__pycache__", ".ipynb_checkpoints")
pytestmark = pytest.mark.slow


def run(
    *argv: str | Path, cwd: Path, timeout: int = 900, **more: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE")}
    # The venv's Spark jars are another class path than the run's, so its JVM would write an
    # archive of its own as it exits, for no later JVM to read. The archive's own tests are
    # test_class_data's.
    env[SWITCH] = "0"
    env.update(more)
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the checkout with the wheel and its report extra installed."""
    where = tmp_path_factory.mktemp("wheel")
    # From a copy of what the wheel is made of: setuptools reuses a build/ folder, so a stale
    # one in the checkout could put deleted modules into the wheel.
    source = where / "source"
    for part in SOURCES:
        target = source / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, target, symlinks=True, ignore=JUNK)
        else:
            shutil.copy2(ROOT / part, target)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", where / "dist", source,
        cwd=where)  # fmt: skip
    (wheel,) = (where / "dist").glob("dedup_lib-*.whl")
    run(sys.executable, "-m", "venv", where / "venv", cwd=where)
    python = where / "venv" / "bin" / "python"
    # Without byte-compiling every installed module (18 s of 49 s here): the tests run few.
    run(python, "-m", "pip", "install", "-q", "--no-compile", f"{wheel}[report]", cwd=where)
    return where


def test_the_installed_package_is_not_the_checkout(installed):
    python = installed / "venv" / "bin" / "python"
    code = "import dedup_lib; print(dedup_lib.__file__); print(dedup_lib.__version__)"
    path, version = run(python, "-c", code, cwd=installed).stdout.split()
    assert Path(path).is_relative_to(installed / "venv")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert version == project["version"]


def test_postmortem_runs_on_a_shipped_sample(installed):
    """The installed command reads a sample and its export that the wheel ships, replays them
    and writes the report, which says what it must (:mod:`report_kit`; simulate's verdicts are
    the in-process CLI tests'). The only postmortem run on the sample: the wheel proves both."""
    python = installed / "venv" / "bin" / "python"
    code = f"from dedup_lib import sample_path as p; print(p('incident.parquet'), p({KEPT!r}))"
    sample, kept = run(python, "-c", code, cwd=installed).stdout.split()
    assert Path(sample).is_relative_to(installed / "venv")
    assert Path(kept).is_relative_to(installed / "venv")
    cli = installed / "venv" / "bin" / "dedup-lib"
    report = run(cli, "postmortem", sample, "--quiet", "--window", WINDOW, "--kept", kept,
                 "--out-dir", "reports", cwd=installed).stdout.strip()  # fmt: skip
    assert Path(report) == installed / "reports" / NAME
    html = Path(report).read_text(encoding="utf-8")
    assert "29,872" in html  # the sample's sends, every one read
    check_incident_report(html)


def test_the_notebooks_written_from_the_wheel_run_on_a_sample(installed):
    """A pip user's workbench: ``dedup-lib notebooks`` writes the five notebooks and their
    pairs from the installed package and registers their kernel in the venv (Jupyter's own
    folders are the test's: no kernel of yours is used); notebook 02 then runs there on the
    incident sample, headless, as papermill runs it."""
    cli = installed / "venv" / "bin" / "dedup-lib"
    jupyter = {"JUPYTER_DATA_DIR": str(installed / "jupyter"), "JUPYTER_PATH": ""}
    said = run(cli, "notebooks", "workbench", cwd=installed, **jupyter).stderr
    assert "registered" in said, said
    folder = installed / "workbench"
    shipped = [p for p in (ROOT / "notebooks").iterdir() if p.is_file()]
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in shipped)
    for source in shipped:
        assert (folder / source.name).read_bytes() == source.read_bytes(), source.name
    python = installed / "venv" / "bin" / "python"
    code = "from dedup_lib import sample_path as p; print(p('incident.parquet'))"
    sample = run(python, "-c", code, cwd=installed).stdout.strip()
    papermill = installed / "venv" / "bin" / "papermill"
    run(papermill, "02_window_explorer.ipynb", "out.ipynb", "-k", "dedup-lib", "-p", "INPUT",
        sample, cwd=folder, **jupyter)  # fmt: skip
    cells = json.loads((folder / "out.ipynb").read_text())["cells"]
    outputs = [o for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
