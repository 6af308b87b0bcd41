"""``dedup-lib notebooks``: the workbench's notebooks written into a folder from the package,
their kernel registered where Jupyter has none of that name (dedup_lib.workbench.notebooks)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from dedup_lib.cli import main
from dedup_lib.cli import notebooks as command
from dedup_lib.workbench import notebooks

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (ROOT / "notebooks").iterdir() if p.is_file())


def test_the_notebooks_and_their_pairs_are_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(command, "register_kernel", lambda: None)
    assert main(["notebooks", str(tmp_path / "workbench")]) == 0
    written = tmp_path / "workbench"
    assert sorted(p.name for p in written.iterdir()) == SHIPPED
    assert "jupytext.toml" in SHIPPED
    assert {p.stem for p in written.glob("0*.ipynb")} == {p.stem for p in written.glob("0*.py")}
    for name in SHIPPED:
        assert (written / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()
    for path in written.glob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        assert any("parameters" in c["metadata"].get("tags", []) for c in cells), path.name
    err = capsys.readouterr().err
    assert f"{len(SHIPPED)} files written" in err
    assert f"jupyter lab {written}" in err


def test_files_there_are_kept_unless_forced(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(command, "register_kernel", lambda: None)
    mine = tmp_path / "02_window_explorer.ipynb"
    mine.write_text("my edits")
    assert main(["notebooks", str(tmp_path)]) == 0
    assert mine.read_text() == "my edits"
    assert "left as they were (--force overwrites): 02_window_explorer.ipynb" in (
        capsys.readouterr().err
    )
    assert main(["notebooks", str(tmp_path), "--force", "--quiet"]) == 0
    assert mine.read_bytes() == (ROOT / "notebooks" / mine.name).read_bytes()
    assert capsys.readouterr().err == ""


def test_a_file_where_the_folder_should_be_is_refused(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("")
    assert main(["notebooks", str(target)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"dedup-lib notebooks: error: {target} is a file; expected a folder"
    )


def test_the_kernel_is_registered_once_where_jupyter_has_none(tmp_path, monkeypatch):
    """Registered as ``python -m ipykernel install`` registers a kernel (the same spec but its
    name), once, and nothing left in the temporary folder."""
    pytest.importorskip("ipykernel")
    from ipykernel.kernelspec import install

    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(notebooks, "KERNEL_NAME", "dedup-lib-test-kernel")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    said = notebooks.register_kernel(str(tmp_path))
    assert said is not None
    assert "registered" in said
    assert list((tmp_path / "tmp").iterdir()) == []
    kernels = tmp_path / "share/jupyter/kernels"
    spec = json.loads((kernels / "dedup-lib-test-kernel/kernel.json").read_text())
    assert spec["display_name"] == notebooks.KERNEL_DISPLAY
    assert notebooks.register_kernel(str(tmp_path)) is None
    install(kernel_name="by-ipykernel", display_name=notebooks.KERNEL_DISPLAY, prefix=str(tmp_path))
    assert spec == json.loads((kernels / "by-ipykernel/kernel.json").read_text())
    shipped = sorted(p.name for p in (kernels / "by-ipykernel").iterdir())
    assert sorted(p.name for p in (kernels / "dedup-lib-test-kernel").iterdir()) == shipped
