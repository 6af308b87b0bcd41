"""``dedup-lib explore`` started for a test, and every process it started found again.

``serve(path)`` runs the command as a user does (a subprocess, with this checkout's ``src/``
first on ``PYTHONPATH``, which Voila's kernels inherit) with a mark in its environment: Voila,
its kernels and their Spark JVMs inherit it too, so ``Served.processes()`` finds all of them
by reading ``/proc`` (Linux), and a test can tell that nothing is left after a stop.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dedup_lib
from dedup_lib.cli.explore import dying_with_parent
from dedup_lib.spark import free_port

#: Where the processes' environments are read.
PROC = Path("/proc")


@dataclass
class Served:
    """A ``dedup-lib explore`` process, the URL it printed, and the mark in its environment
    (and so in that of Voila, its kernels and their JVMs)."""

    process: subprocess.Popen[str]
    url: str
    mark: str
    log: Path

    def stderr(self) -> str:
        """What the command (and Voila) wrote to stderr so far."""
        return self.log.read_text(errors="replace")

    def diagnosis(self, lines: int = 60) -> str:
        """For a failed test: which of its processes are alive (Voila, its kernel, the
        kernel's JVM) and the end of its stderr."""
        alive = "\n".join(self.processes()) or "none"
        tail = "\n".join(self.stderr().splitlines()[-lines:])
        return f"dedup-lib explore's processes alive:\n{alive}\nthe end of its stderr:\n{tail}"

    @property
    def base(self) -> str:
        return self.url.split("?")[0]

    def processes(self) -> list[str]:
        """Every live process started by it or below it: each inherited the mark."""
        found = []
        needle = f"DEDUP_TEST_MARK={self.mark}".encode()
        for proc in PROC.iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if needle in (proc / "environ").read_bytes():
                    found.append(f"{proc.name} {(proc / 'cmdline').read_bytes()[:120]!r}")
            except OSError:
                continue
        return found

    def left_after(self, seconds: float = 45) -> list[str]:
        """What is still running once ``seconds`` have passed, or sooner when nothing is."""
        deadline = time.monotonic() + seconds
        while (left := self.processes()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return left


def get(url: str) -> tuple[int, str, str]:
    """Status, Location and body of a GET that does not follow redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=300) as response:
            return response.status, "", response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location", ""), ""


@contextlib.contextmanager
def serve(path: Path, *options: str, cwd: Path | None = None) -> Iterator[Served]:
    """``dedup-lib explore path`` on a free port, without a browser; killed, with all it
    started, however the test ends. Its stderr goes to a file (a pipe nobody reads would
    stop Voila once full)."""
    mark = uuid.uuid4().hex
    src = str(Path(dedup_lib.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "DEDUP_TEST_MARK": mark,
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-m", "dedup_lib", "explore", str(path), "--no-browser"]
    with tempfile.TemporaryDirectory(prefix="dedup-explore-") as folder:
        log = Path(folder) / "stderr.log"
        with log.open("w") as err:
            process = subprocess.Popen(
                dying_with_parent([*command, *options, "--port", str(free_port())]),
                env=env, stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd,
            )  # fmt: skip
        server = None
        try:
            line = process.stdout.readline() if process.stdout else ""
            url = re.search(r"http://\S+", line)
            assert url, f"no URL printed: {line!r}; stderr: {log.read_text()!r}"
            server = Served(process, url.group(0), mark, log)
            yield server
        except BaseException as exc:
            if server is not None:
                exc.add_note(server.diagnosis())
            raise
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            for pid in (p.split()[0] for p in (server.processes() if server else [])):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)


def refused_without_its_token(served: Served) -> None:
    """No page and no kernel for whoever lacks the token the command printed."""
    assert "token=" in served.url
    assert len(served.url.split("token=")[1]) >= 32
    for url in (served.base, f"{served.base}?token=wrong", f"{served.base}api/kernels"):
        status, location, _ = get(url)
        assert status in (302, 403), (url, status)
        assert status == 403 or "/login" in location
    assert not any("ipykernel" in p for p in served.processes()), "a kernel ran without the token"
