"""The wheel as a pip user gets it: built with ``pip wheel`` from a copy of what it is made of,
installed with its report extra into a fresh venv in a temporary folder, and run from there
(no path into this source tree). What that proves:

- the venv imports the installed package, of the project's version, not the checkout;
- the wheel holds every file git tracks under ``src/dedup_lib`` (the links to ``notebooks/``
  and ``data/samples/`` followed), byte for byte as it was built from: the modules, the JVM
  kernels' Java, the notebooks and their pairs, the samples, the resources (rules, runbooks,
  dashboard, unit file, log4j2);
- ``dedup-lib postmortem`` runs the packaged postmortem notebook on a shipped sample in a
  kernel of its own and writes the report (the one notebook run here: a kernel and a JVM),
  printing its path and no Spark log;
- ``dedup-lib notebooks`` writes the five notebooks and their pairs as the checkout has them,
  naming the kernel it registers, and that kernel starts from the venv's Python and imports
  the installed package.

The notebooks' own runs are tested on the same files (the checkout's, which the wheel is
shown to ship unchanged): ``tests/browser/test_notebooks.py`` runs every notebook in
JupyterLab in Chromium, ``tests/workbench/test_user_data.py`` every notebook headless on the
analysts' data.

The venv's dependencies are installed by uv, from its cache by hard link: pip copies
pyspark's 400 MB out of its cache into every new venv (some 20 CPU-seconds here, uv under 2);
by pip where pip is told an index of the user's, as ``make install`` does.
The wheel itself is still built by ``pip wheel``, as a pip user builds it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from uv import find_uv_bin

from dedup_lib.class_data import SWITCH
from lab_kit import LOG_TEXT
from report_kit import KEPT, NAME, WINDOW, check_incident_report

ROOT = Path(__file__).resolve().parents[1]
#: What the wheel is built from: the package, the files it links to, the metadata.
SOURCES = ("pyproject.toml", "README.md", "src", "data/samples", "notebooks")
#: What is deliberately not shipped (nor tracked, nor copied to build the wheel from).
NOT_SHIPPED = ("*.egg-info", "__pycache__", ".ipynb_checkpoints")
JUNK = shutil.ignore_patterns(*NOT_SHIPPED)
#: uv's settings (PyPI's own caching rules), as make install uses them.
UV_CONFIG = ROOT / "uv.toml"
#: Run by the venv's Python: the kernel named by its first argument started as Jupyter there
#: starts it (jupyter_client, the test's Jupyter folders), the code of its second argument
#: executed in it; its kernel spec's argv, the reply's status and the code's stdout as JSON.
IN_KERNEL = """\
import json, sys
from jupyter_client.manager import start_new_kernel

manager, client = start_new_kernel(kernel_name=sys.argv[1])
out = []


def hook(message):
    if message["msg_type"] == "stream" and message["content"]["name"] == "stdout":
        out.append(message["content"]["text"])


try:
    reply = client.execute_interactive(sys.argv[2], output_hook=hook, timeout=120)
finally:
    client.stop_channels()
    manager.shutdown_kernel(now=True)
said = {"argv": manager.kernel_spec.argv, "status": reply["content"]["status"]}
print(json.dumps({**said, "stdout": "".join(out)}))
"""
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
    """A fresh venv outside the checkout with the wheel and its report extra installed; the
    wheel in ``dist/`` and what it was built from in ``source/`` beside it."""
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
    if _pip_has_an_index_of_its_own(python):  # a mirror of the user's: pip, as told
        run(python, "-m", "pip", "install", "-q", "--no-compile", f"{wheel}[report]", cwd=where)
    else:
        run(find_uv_bin(), "pip", "install", "-q", "--config-file", UV_CONFIG,
            "--python", python, f"{wheel}[report]", cwd=where)  # fmt: skip
    return where


def _pip_has_an_index_of_its_own(python: Path) -> bool:
    """Whether pip is told an index instead of PyPI's (make install's test, in Python)."""
    if os.environ.get("PIP_INDEX_URL"):
        return True
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                            text=True, check=False).stdout  # fmt: skip
    return any(line.partition("=")[0].endswith(".index-url") for line in listed.splitlines())


def _package(installed: Path) -> Path:
    """The folder of the package the venv imports."""
    python = installed / "venv" / "bin" / "python"
    code = "import dedup_lib; print(dedup_lib.__file__)"
    return Path(run(python, "-c", code, cwd=installed).stdout.strip()).parent


def _tracked() -> list[str]:
    """Every file git tracks under ``src/dedup_lib``, relative to it, each link to a folder
    (``resources/notebooks``, ``resources/samples``) replaced by the files git tracks there."""
    package = ROOT / "src" / "dedup_lib"

    def ls(folder: Path) -> list[str]:
        argv = ["git", "ls-files", "-z", "--", str(folder.relative_to(ROOT))]
        listed = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
        return [name for name in listed.stdout.split("\0") if name]

    files = []
    for name in ls(package):
        path = ROOT / name
        within = path.relative_to(package).as_posix()
        if path.is_symlink() and path.is_dir():
            target = path.resolve()
            files += [f"{within}/{(ROOT / t).relative_to(target).as_posix()}" for t in ls(target)]
        else:
            files.append(within)
    return sorted(files)


def test_the_installed_package_is_not_the_checkout(installed):
    python = installed / "venv" / "bin" / "python"
    code = "import dedup_lib; print(dedup_lib.__file__); print(dedup_lib.__version__)"
    path, version = run(python, "-c", code, cwd=installed).stdout.split()
    assert Path(path).is_relative_to(installed / "venv")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert version == project["version"]


def test_the_wheel_ships_every_file_git_tracks_in_the_package(installed):
    """Each file git tracks under ``src/dedup_lib`` (the notebooks and samples behind its
    links included) is in the installed package, the same bytes as the copy the wheel was
    built from; and the wheel holds nothing beside the package and its metadata."""
    tracked = _tracked()
    assert "__init__.py" in tracked
    assert "resources/notebooks/02_window_explorer.ipynb" in tracked  # the links followed
    assert "resources/samples/incident-kept/orders.json.gz" in tracked
    package = _package(installed)
    built = installed / "source" / "src" / "dedup_lib"
    assert [name for name in tracked if not (package / name).is_file()] == []
    changed = [n for n in tracked if (package / n).read_bytes() != (built / n).read_bytes()]
    assert changed == []
    (wheel,) = (installed / "dist").glob("dedup_lib-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.partition("/")[0] for name in archive.namelist()}
    assert tops == {"dedup_lib", wheel.name.split("-py")[0] + ".dist-info"}


def test_postmortem_runs_on_a_shipped_sample(installed):
    """The installed command reads a sample and its export that the wheel ships, runs the
    packaged postmortem notebook on them in a kernel of its own and writes the report, which
    says what it must (:mod:`report_kit`; simulate's verdicts are the in-process CLI tests'),
    printing nothing but the report's path.
    The only postmortem run on the sample, and the only notebook run here: the wheel proves
    both."""
    python = installed / "venv" / "bin" / "python"
    code = f"from dedup_lib import sample_path as p; print(p('incident.parquet'), p({KEPT!r}))"
    sample, kept = run(python, "-c", code, cwd=installed).stdout.split()
    assert Path(sample).is_relative_to(installed / "venv")
    assert Path(kept).is_relative_to(installed / "venv")
    cli = installed / "venv" / "bin" / "dedup-lib"
    done = run(cli, "postmortem", sample, "--quiet", "--window", WINDOW, "--kept", kept,
               "--out-dir", "reports", cwd=installed)  # fmt: skip
    # Quiet, it prints the report's path and nothing else: no Spark or Java log text, from
    # its own JVM or the notebook's kernel's (test_clean_output's, for a notebook).
    assert done.stderr == ""
    assert not LOG_TEXT.search(done.stdout), done.stdout
    report = done.stdout.strip()
    assert Path(report) == installed / "reports" / NAME
    html = Path(report).read_text(encoding="utf-8")
    assert "29,872" in html  # the sample's sends, every one read
    check_incident_report(html)


def test_the_notebooks_command_writes_the_notebooks_and_a_kernel_of_the_venv(installed):
    """A pip user's workbench: ``dedup-lib notebooks`` writes the five notebooks and their
    pairs from the installed package, as the checkout has them, and registers the kernel they
    name in the venv (Jupyter's own folders are the test's: no kernel of yours is used). That
    kernel, started as Jupyter in the venv starts it, runs the venv's Python and imports the
    installed package. The notebooks' runs are tests/browser/test_notebooks.py's and
    tests/workbench/test_user_data.py's, on the files this shows the wheel ships."""
    venv = installed / "venv"
    cli = venv / "bin" / "dedup-lib"
    jupyter = {"JUPYTER_DATA_DIR": str(installed / "jupyter"), "JUPYTER_PATH": ""}
    said = run(cli, "notebooks", "workbench", cwd=installed, **jupyter).stderr
    assert "registered" in said, said
    folder = installed / "workbench"
    shipped = [p for p in (ROOT / "notebooks").iterdir() if p.is_file()]
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in shipped)
    for source in shipped:
        assert (folder / source.name).read_bytes() == source.read_bytes(), source.name
    notebooks = sorted(folder.glob("0*.ipynb"))
    assert len(notebooks) == 5
    kernels = {json.loads(p.read_text())["metadata"]["kernelspec"]["name"] for p in notebooks}
    assert len(kernels) == 1
    code = "import sys, dedup_lib; print(sys.executable); print(dedup_lib.__file__)"
    started = run(venv / "bin" / "python", "-c", IN_KERNEL, *kernels, code, cwd=folder,
                  timeout=300, **jupyter).stdout  # fmt: skip
    kernel = json.loads(started.splitlines()[-1])
    assert kernel["status"] == "ok", kernel
    assert kernel["argv"][0] == str(venv / "bin" / "python")
    executable, imported = kernel["stdout"].split()
    assert executable == str(venv / "bin" / "python")
    assert Path(imported).is_relative_to(venv), imported
