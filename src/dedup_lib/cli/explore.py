"""``dedup-lib explore``: the window explorer as a standalone web page, served by Voilà, for
colleagues who do not use JupyterLab: the explorer only, no code.

The page is a notebook shipped in the package (``resources/explorer.ipynb``). Its parameters
(input, window, mode, format, column mapping, entity) are environment variables of the Voilà
server, which Voilà's kernels inherit: the notebook stays one fixed, reviewed file (no
generated code, no quoting of paths into source, nothing temporary to clean up), and
``--master``, ``--remote``, ``--driver-host`` and ``--spark-ui`` reach
:func:`dedup_lib.spark.get_spark` the same way (``DEDUP_SPARK_MASTER``, ``SPARK_REMOTE``,
``DEDUP_SPARK_DRIVER_HOST``, ``DEDUP_SPARK_UI``). Voilà listens on 127.0.0.1, its kernels on
Unix sockets, and each kernel's Spark on 127.0.0.1 (its UI too) unless those options say
otherwise.

Whoever reaches the port runs kernels, so the page takes a token, as Jupyter's do: a new one
per run, in the URL this command prints and opens, and requests without it are refused. The
token reaches Voilà as ``JUPYTER_TOKEN`` in its environment, not on its command line, which any
user of the machine can read. However this command ends (Ctrl-C, SIGTERM from a service manager
or a container, SIGHUP when its terminal closes, even SIGKILL on Linux), Voilà stops, and with
it its kernels and their Spark.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import webbrowser
from collections.abc import Iterator, Sequence
from importlib.resources import as_file, files
from types import FrameType

from dedup_lib.cli.options import (
    PROG,
    TELEMETRY_FORMATS,
    CommandError,
    add_column_mapping,
    column_mapping,
    entity_name,
    existing_input,
    remote_cluster,
    window_policy,
)
from dedup_lib.errors import printable
from dedup_lib.telemetry.files import local_path

#: The page: a notebook that loads the input and shows ``WindowExplorer(...).widget``.
EXPLORER = files("dedup_lib") / "resources" / "explorer.ipynb"

INSTALL = "pip install 'dedup-lib[explore]'"

#: How long Voilà may take to listen on its port.
START_SECONDS = 120.0

#: The signals that stop the command as Ctrl-C does: a service manager's or a container's
#: stop (SIGTERM), a closed terminal (SIGHUP).
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)

EXAMPLES = """\
examples:
  dedup-lib explore data/samples/day.parquet
  dedup-lib explore sends/ --window PT1M --partitioning --port 8870
  dedup-lib explore traces.jsonl.gz --format otlp --no-browser
  dedup-lib explore sends.csv --map Id=message_id --map Enqueued=send_time --entity orders
"""


def check_port_free(port: int) -> None:
    """``port`` can be listened on here: checked before Voilà starts, which would otherwise
    move to another port than the URL printed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise CommandError(f"--port {port}: cannot listen there ({exc.strerror})") from None


def port_number(text: str) -> int:
    """A TCP port for ``--port``: 1 to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {value}")
    return value


def voila_installed() -> None:
    if importlib.util.find_spec("voila") is None:
        raise CommandError(f"explore needs Voilà, which is not installed: {INSTALL}")


def page_environment(args: argparse.Namespace, token: str) -> dict[str, str]:
    """The server's environment: this one plus the page's parameters and its ``token``. A
    local input is made absolute, as the kernel runs in the notebook's folder; a URL, or a path
    only a remote cluster has, goes as written, for the cluster to resolve."""
    local = local_path(args.input)
    here = local is not None and os.path.exists(local)
    path = args.input if local is None or (remote_cluster(args) and not here) else local
    env = {
        **os.environ,
        "DEDUP_EXPLORE_INPUT": path,
        "DEDUP_EXPLORE_LABEL": args.input,
        "DEDUP_EXPLORE_WINDOW": args.window,
        "DEDUP_EXPLORE_PARTITIONING": "1" if args.partitioning else "",
        "DEDUP_EXPLORE_FORMAT": args.format or "",
        "DEDUP_EXPLORE_MAP": json.dumps(column_mapping(args.map)),
        "DEDUP_EXPLORE_ENTITY": args.entity or "",
        "JUPYTER_TOKEN": token,
    }
    if args.master:
        env["DEDUP_SPARK_MASTER"] = args.master
    if args.remote:
        env["SPARK_REMOTE"] = args.remote
    if args.driver_host:
        env["DEDUP_SPARK_DRIVER_HOST"] = args.driver_host
    if args.spark_ui:
        env["DEDUP_SPARK_UI"] = args.spark_ui
    return env


def voila_command(notebook: str, port: int) -> list[str]:
    """Voilà on ``notebook``, on localhost ``port`` only, with the token of ``JUPYTER_TOKEN``
    (``auto_token``: without it Voilà serves anyone), sources stripped, no browser (this command
    opens it once the server listens), no tracebacks on the page, and the kernels of closed
    pages (each with its own Spark) stopped."""
    return [
        sys.executable,
        "-m",
        "voila",
        notebook,
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--Voila.port_retries=0",
        "--Voila.auto_token=True",
        "--no-browser",
        "--strip_sources=True",
        "--show_tracebacks=False",
        "--theme=light",
        "--Voila.log_level=WARN",
        # jupytext's lab extension edits notebooks: on a page it fails to load (a console error)
        "--VoilaConfiguration.extension_denylist=jupyterlab-jupytext",
        # kernels on Unix sockets in a private folder, not on TCP ports any local user reaches
        "--KernelManager.transport=ipc",
        # each visit has its own kernel and Spark: one left by a closed tab goes after 5 idle min
        "--MappingKernelManager.cull_idle_timeout=300",
        "--MappingKernelManager.cull_interval=60",
    ]


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _wait_listening(server: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not _listening(port):
        if server.poll() is not None:
            raise CommandError(
                f"Voilà stopped before serving the page (exit status {server.returncode})"
            )
        if time.monotonic() > deadline:
            raise CommandError(f"Voilà did not listen on port {port} within {START_SECONDS:.0f} s")
        time.sleep(0.2)


def _stop(server: subprocess.Popen[bytes]) -> None:
    """Stop Voilà and its kernels: SIGTERM (it shuts its kernels down), then SIGKILL. Voilà runs
    in its own session, so the terminal's Ctrl-C reaches this command only, not a Voilà that
    would ask for confirmation."""
    if server.poll() is not None:
        return
    # A second Ctrl-C or SIGTERM while Voilà stops its kernels must not leave them running.
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, *STOP_SIGNALS)}
    try:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


class Stopped(BaseException):
    """This command was told to stop by a signal (as Ctrl-C raises ``KeyboardInterrupt``)."""


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """Within: SIGTERM and SIGHUP raise :class:`Stopped`, so the server is stopped as on
    Ctrl-C; the handlers before are restored after."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Stopped(signal.Signals(signum).name)

    before = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


#: Run by :func:`dying_with_parent` in the child: ask the kernel for SIGTERM when the parent
#: dies (``PR_SET_PDEATHSIG``, which exec keeps), unless it is gone already; become the command.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys; "
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM); "
    "os.getppid() == int(sys.argv[1]) or sys.exit(143); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def dying_with_parent(command: Sequence[str]) -> list[str]:
    """``command`` started so that, on Linux, the kernel sends it SIGTERM when this process
    dies, even of SIGKILL, which no handler sees. A short Python step asks for it and then
    execs the command, rather than a ``preexec_fn``: Python code run between fork and exec in
    a process with threads (a Spark Connect session's gRPC) can kill the child before it
    starts ("epoll_wait error: Bad file descriptor"), and without one, subprocess spawns
    without running this process's fork handlers."""
    if not sys.platform.startswith("linux"):
        return list(command)
    return [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]


def run(args: argparse.Namespace) -> int:
    existing_input(args.input, args)
    window_policy(args.window, partitioning=args.partitioning)
    token = secrets.token_urlsafe(32)
    env = page_environment(args, token)  # reads --map, whose errors come before Voila's
    voila_installed()
    check_port_free(args.port)
    url = f"http://127.0.0.1:{args.port}/?token={token}"
    with as_file(EXPLORER) as notebook, stopped_by_signals():
        server = subprocess.Popen(
            dying_with_parent(voila_command(str(notebook), args.port)),
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            _wait_listening(server, args.port)
            print(f"The window explorer on {printable(args.input)}: {url}", flush=True)
            if not args.quiet:
                print("Press Ctrl-C to stop it.", file=sys.stderr, flush=True)
            if args.open_browser:
                webbrowser.open(url)
            status = server.wait()
        except (KeyboardInterrupt, Stopped) as stop:
            _stop(server)
            if not args.quiet:
                why = f" ({stop})" if isinstance(stop, Stopped) else ""
                print(f"{PROG} explore: stopped{why}", file=sys.stderr)
            return 0
        finally:
            _stop(server)
    if status:
        raise CommandError(f"Voilà stopped with exit status {status}")
    return 0


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``explore`` command and its options."""
    page = commands.add_parser(
        "explore",
        parents=[common],
        help="serve the window explorer as a web page (Voilà), for people without JupyterLab",
        description="Serve the window explorer on INPUT as a standalone web page with Voilà:\n"
        "the explorer only, no code. Whoever opens the URL printed (it carries a token made\n"
        "for this run; without it the page is refused) can move the window, switch\n"
        "partitioning, pick an entity or a time range. The server listens on 127.0.0.1 only;\n"
        f"Ctrl-C, SIGTERM or SIGHUP stops it and its kernels. Needs Voilà: {INSTALL}.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    page.add_argument("input", metavar="INPUT", help="a file or folder: Parquet, CSV, JSON Lines")
    page.add_argument("--window", default="PT10M", help="the window shown first (default: PT10M)")
    page.add_argument(
        "--partitioning", action="store_true", help="start with the partitioned mode selected"
    )
    page.add_argument(
        "--format",
        choices=TELEMETRY_FORMATS,
        help="input format (default: from the file names and content)",
    )
    page.add_argument(
        "--entity", type=entity_name, help="the queue or topic of rows that name none"
    )
    add_column_mapping(
        page,
        "--map",
        "rename a column, e.g. --map Id=message_id, or read a nested field (repeatable)",
    )
    page.add_argument(
        "--port", type=port_number, default=8866, help="the port to serve on (default: 8866)"
    )
    page.add_argument(
        "--no-browser",
        dest="open_browser",
        action="store_false",
        help="print the URL only; do not open a browser",
    )
    page.set_defaults(run=run)
