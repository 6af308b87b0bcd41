"""``dedup-lib notebooks DIR``: the workbench's five notebooks, from the installed package,
into a folder JupyterLab opens: each ``.ipynb`` with its jupytext pair (``.py``),
``jupytext.toml`` and the notebooks' README, without outputs, each with its ``parameters``
cell (``INPUT``: left at None, the shipped samples). A file already there is left as it is
unless ``--force``. The notebooks name the Jupyter kernel ``dedup-lib``: where this
environment has ipykernel and no such kernel, it is registered for this interpreter, in this
environment (``sys.prefix``), and the command says so
(:mod:`dedup_lib.workbench.notebooks`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dedup_lib.errors import printable
from dedup_lib.workbench.notebooks import register_kernel, write_notebooks


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``notebooks`` subcommand."""
    sub = commands.add_parser(
        "notebooks",
        help="write the workbench's notebooks into a folder, to open with JupyterLab",
        description="Write the workbench's five notebooks (each with its jupytext .py pair, "
        "jupytext.toml and a README) into FOLDER, and register the Jupyter kernel "
        "'dedup-lib' for this Python where Jupyter has none of that name. Files already "
        "there are left as they are unless --force.",
        epilog="example:\n  dedup-lib notebooks ~/dedup-workbench && jupyter lab ~/dedup-workbench",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument(
        "folder", type=Path, metavar="FOLDER", help="where to write them (created if missing)"
    )
    sub.add_argument("--force", action="store_true", help="overwrite files already there")
    sub.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    written, left = write_notebooks(args.folder, force=args.force)
    kernel = register_kernel()
    if not args.quiet:
        where = printable(str(args.folder))
        print(f"{len(written)} files written to {where}", file=sys.stderr)
        if left:
            names = ", ".join(printable(p.name) for p in left)
            print(f"left as they were (--force overwrites): {names}", file=sys.stderr)
        if kernel:
            print(kernel, file=sys.stderr)
        print(f"open them: jupyter lab {where}", file=sys.stderr)
    return 0
