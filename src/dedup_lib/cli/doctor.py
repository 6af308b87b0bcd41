"""``dedup-lib doctor``: what the workbench needs on this machine, one line per check, with
what to do where something is missing. ``make lab`` and ``make test`` run it first."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from dedup_lib.errors import ToolMissingError, printable
from dedup_lib.replay.kernels import jvm
from dedup_lib.spark import check_java
from dedup_lib.workbench.notebooks import KERNEL_DISPLAY, KERNEL_NAME

_NAMED = ("--name", KERNEL_NAME, "--display-name", KERNEL_DISPLAY)
#: How to register the kernel for this interpreter, named by its whole path: a bare
#: ``python`` may be another one, without this package, outside its environment.
KERNEL_INSTALL = shlex.join([sys.executable, "-m", "ipykernel", "install", "--user", *_NAMED])

Status = Literal["ok", "note", "error"]


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer."""

    status: Status
    what: str
    text: str

    def line(self) -> str:
        return f"{self.status:<5} {self.what:<13} {self.text}"


def java(remote: str | None) -> Check:
    """Java 17+ for a local session; only a note when the session is a remote Connect server."""
    try:
        version = check_java()
    except ToolMissingError as exc:
        status: Status = "note" if remote and remote.startswith("sc://") else "error"
        return Check(status, "java", str(exc))
    return Check("ok", "java", f"Java {version}, for local Spark")


def jvm_kernel() -> Check:
    """The JVM replay kernel built (or found in the cache), else why the Python one will run."""
    try:
        jar = jvm.jar_path()
    except jvm.JvmKernelUnavailable as exc:
        return Check(
            "note", "replay kernel", f"the Python kernel will run (same verdicts, slower): {exc}"
        )
    return Check("ok", "replay kernel", f"JVM kernel {jar}")


def jupyter_kernel() -> Check:
    """The ``dedup-lib`` Jupyter kernel, pointing at an interpreter that has this package."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:
        return Check(
            "note", "jupyter", "JupyterLab is not installed here: pip install 'dedup-lib[lab]'"
        )
    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        return Check("error", "jupyter", f"no Jupyter kernel {KERNEL_NAME!r}: {KERNEL_INSTALL}")
    python = spec.argv[0] if spec.argv else ""
    if not Path(python).exists():
        return Check(
            "error",
            "jupyter",
            f"kernel {KERNEL_NAME!r} runs {python or 'nothing'}, which does not exist: "
            f"{KERNEL_INSTALL}",
        )
    return Check("ok", "jupyter", f"kernel {KERNEL_NAME!r} ({spec.display_name}) runs {python}")


def spark_connect(remote: str | None, timeout: float = 3.0) -> Check:
    """A remote Spark Connect server (``sc://host:port``) answers on its port."""
    if not remote:
        return Check("ok", "spark", "local Spark (set SPARK_REMOTE=sc://host:15002 for a cluster)")
    if not remote.startswith("sc://"):
        return Check("ok", "spark", f"a local Spark Connect server ({remote}), started on use")
    url = urlparse(remote.replace("sc://", "http://", 1))
    host, port = url.hostname or "localhost", url.port or 15002
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        return Check(
            "error",
            "spark",
            f"Spark Connect at {host}:{port} does not answer ({exc.strerror or exc}): start the "
            "server, or unset SPARK_REMOTE for local Spark",
        )
    return Check("ok", "spark", f"Spark Connect at {host}:{port} answers")


def checks(remote: str | None, kernel: bool) -> list[Check]:
    """Every check, in the order a user fixes them."""
    found = [java(remote), jvm_kernel()]
    if kernel:
        found.append(jupyter_kernel())
    found.append(spark_connect(remote))
    return found


def run(args: argparse.Namespace) -> int:
    remote = args.remote or os.environ.get("SPARK_REMOTE") or None
    found = checks(remote, kernel=args.jupyter)
    for check in found:
        print(printable(check.line()))
    if args.json:
        print(json.dumps([check.__dict__ for check in found]))
    return 1 if any(c.status == "error" for c in found) else 0


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``doctor`` command and its options."""
    doctor = commands.add_parser(
        "doctor",
        help="check Java, the JVM replay kernel, the Jupyter kernel and Spark Connect",
        description="Check what the workbench needs on this machine: a Java 17+ runtime for "
        "local Spark, the JVM replay kernel (built here on first use), the Jupyter kernel "
        f"{KERNEL_NAME!r} the notebooks name, and a Spark Connect server when SPARK_REMOTE "
        "or --remote names one. One line per check; exit status 1 when one is an error.",
    )
    doctor.add_argument("--remote", help="Spark Connect URL to check (default: $SPARK_REMOTE)")
    doctor.add_argument(
        "--no-jupyter",
        dest="jupyter",
        action="store_false",
        help="skip the Jupyter kernel check (for a machine without the notebooks)",
    )
    doctor.add_argument("--json", action="store_true", help="also print the checks as JSON")
    doctor.set_defaults(run=run)
