"""The workbench's five notebooks as the package ships them, copied into a folder JupyterLab
opens: each ``.ipynb`` with its jupytext pair (``.py``), ``jupytext.toml`` and the notebooks'
README, without outputs, each with its ``parameters`` cell (``INPUT``: left at None, the
shipped samples). The notebooks name the Jupyter kernel ``dedup-lib``, which
:func:`register_kernel` registers for this interpreter where Jupyter has none of that name.
"""

from __future__ import annotations

import platform
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from dedup_lib.errors import DedupLibError, printable

#: The Jupyter kernel the notebooks name in their metadata.
KERNEL_NAME = "dedup-lib"
KERNEL_DISPLAY = "dedup-lib (Spark)"


def shipped_notebooks() -> list[Path]:
    """The files of the workbench's notebooks as the package ships them."""
    folder = resources.files("dedup_lib") / "resources" / "notebooks"
    if not folder.is_dir():
        raise DedupLibError(f"this installation of dedup-lib has no notebooks ({folder})")
    return sorted(
        Path(str(f))
        for f in folder.iterdir()
        if (f.name.startswith("0") and f.name.endswith((".ipynb", ".py")))
        or f.name in ("jupytext.toml", "README.md")
    )


def write_notebooks(folder: Path, *, force: bool = False) -> tuple[list[Path], list[Path]]:
    """Copy the shipped notebooks into ``folder``: the files written, and those left as
    they were because they exist (all written with ``force``)."""
    if folder.exists() and not folder.is_dir():
        raise DedupLibError(f"{printable(str(folder))} is a file; expected a folder")
    folder.mkdir(parents=True, exist_ok=True)
    written, left = [], []
    for source in shipped_notebooks():
        target = folder / source.name
        if target.exists() and not force:
            left.append(target)
            continue
        shutil.copyfile(source, target)
        written.append(target)
    return written, left


def register_kernel(prefix: str = sys.prefix) -> str | None:
    """Register the ``dedup-lib`` Jupyter kernel for this interpreter (:func:`install_kernel`)
    where Jupyter finds no kernel of that name: what was done, or None where nothing was."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:
        return "no Jupyter here: pip install 'dedup-lib[lab]' to open the notebooks"
    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        install_kernel(prefix)
        return f"Jupyter kernel {KERNEL_NAME!r} registered for {sys.executable}"
    return None


def install_kernel(prefix: str = sys.prefix) -> None:
    """Install the ``dedup-lib`` Jupyter kernel for this interpreter in the environment at
    ``prefix`` (this one; ``make install`` puts it in the venv). The spec is ipykernel's, as
    ``python -m ipykernel install`` writes it (frozen modules off, for its debugger), staged
    in a folder removed once it is installed: ipykernel's ``install()`` stages it in a
    temporary folder it leaves behind, empty."""
    from ipykernel.kernelspec import write_kernel_spec
    from jupyter_client.kernelspec import KernelSpecManager

    frozen = ["-Xfrozen_modules=off"] if platform.python_implementation() == "CPython" else []
    with tempfile.TemporaryDirectory() as staging:
        spec = write_kernel_spec(
            Path(staging) / KERNEL_NAME,
            overrides={"display_name": KERNEL_DISPLAY},
            python_arguments=frozen,
        )
        KernelSpecManager().install_kernel_spec(spec, kernel_name=KERNEL_NAME, prefix=prefix)
