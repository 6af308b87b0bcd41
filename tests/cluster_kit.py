"""A real multi-process Spark on this machine, for the cluster test (``make test-cluster``):
a standalone master, one worker and a Spark Connect server, each a JVM of its own started
from the installed ``pyspark`` (its ``bin/spark-class`` and ``sbin/start-connect-server.sh``;
pyspark 4 ships the Connect server's jar), all bound to 127.0.0.1. The Connect server starts
with the options ``dedup-lib connect-options`` prints (the live monitor's judge), as the guide
starts one.

Each is started in a process group of its own and waited for (its port open, the worker
registered); their pids are written to ``pids.json``, and :meth:`Cluster.stop` ends each group
by that pid, also when a start fails or the run is interrupted. Logs stay in the cluster's
folder (``build/cluster/`` in the checkout), whose path a failure names.

The executors' Python is this interpreter without its ``site`` hooks: pyspark, pyarrow and
numpy import, ``dedup_lib`` (installed editable, through a ``.pth`` file) does not, as on a
cluster where nothing but Spark was installed.

The worker offers four cores (the machine's two, each twice): the Connect server's application
takes two, and a classic application started beside it (``dedup-lib watch --master
spark://...``) the other two, with Spark's default executor memory (1 GiB).

By hand: ``python tests/cluster_kit.py`` starts it, prints ``SPARK_REMOTE`` and waits for
Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyspark

import dedup_lib
from dedup_lib.class_data import alive
from dedup_lib.live.executors.connect import server_options
from dedup_lib.live.executors.processor import jar_path
from dedup_lib.spark import check_java, class_data_options, free_port

ROOT = Path(__file__).resolve().parents[1]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
#: The tests' Spark defaults (the root conftest.py gives them to the JVMs PySpark starts).
SPARK_DEFAULTS = ROOT / "tests" / "spark-conf" / "spark-defaults.conf"
HOST = "127.0.0.1"
#: Name the master's and the Connect server's ports; else each is found free as the cluster
#: starts (Spark's defaults, 7077 and 15002, may be held by another Spark on the machine).
PORT_VARIABLES = ("DEDUP_CLUSTER_MASTER_PORT", "DEDUP_CLUSTER_CONNECT_PORT")
#: What the Connect server logs once it serves: its port open alone may be another's.
CONNECT_STARTED = "Spark Connect server started at"
#: What a start may take on a busy two-core machine.
START_TIMEOUT = 180.0
#: Variables of this process that would make a cluster JVM a client, or give its Python
#: workers this checkout's dedup_lib.
CLIENT_VARIABLES = (
    "SPARK_CONNECT_AUTHENTICATE_TOKEN",
    "PYTHONPATH",
    "SPARK_REMOTE",
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_LOCAL_REMOTE",
    "PYSPARK_GATEWAY_PORT",
    "PYSPARK_GATEWAY_SECRET",
    "SPARK_TESTING",
)


#: The cluster's folder: its logs, pids and what the tests on it write.
FOLDER = ROOT / "build" / "cluster"
#: The input of the cluster's batch replay, as a user in the checkout names it (relative).
INPUT = "data/samples/incident.parquet"
#: The columns of a verdict compared between a local run and the cluster's.
VERDICT_COLUMNS = (
    "event_id", "verdict", "reason", "dedup_key", "original_send_time", "original_event_id",
)  # fmt: skip
#: This checkout's ``src``, for the clients the tests start (not for the cluster's Python).
SRC = str(Path(dedup_lib.__file__).resolve().parents[1])


class ClusterError(RuntimeError):
    """A part of the cluster did not start; the message names its log."""


@dataclass
class Cluster:
    """The running parts, in the order they were started."""

    folder: Path
    master_port: int
    connect_port: int
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def remote(self) -> str:
        """The ``SPARK_REMOTE`` of the Connect server."""
        return f"sc://{HOST}:{self.connect_port}"

    @property
    def master(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    def log(self, name: str) -> Path:
        return self.folder / f"{name}.log"

    def stop(self) -> None:
        """End every part by its pid (its process group: the worker's executors too), the
        last started first."""
        for name in reversed(list(self.processes)):
            process = self.processes.pop(name)
            _end_group(process)
        (self.folder / "pids.json").unlink(missing_ok=True)

    def _started(self, name: str, process: subprocess.Popen[bytes]) -> None:
        self.processes[name] = process
        pids = {n: p.pid for n, p in self.processes.items()}
        (self.folder / "pids.json").write_text(json.dumps(pids, indent=2) + "\n")


def _end_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def connect_jar() -> Path:
    """The Spark Connect server's jar in pyspark's ``jars/``; without it the server would need
    ``--packages``, that is Maven Central, which this test does not reach."""
    found = sorted((SPARK_HOME / "jars").glob("spark-connect_*.jar"))
    if not found:
        raise ClusterError(
            f"{SPARK_HOME / 'jars'} has no spark-connect jar: this pyspark cannot start a "
            "Spark Connect server without --packages (network)"
        )
    return found[0]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((HOST, port)) == 0


def _executor_python(folder: Path) -> Path:
    """A script that runs this interpreter with no ``site`` processing and its site-packages
    on the path: the libraries come, ``.pth`` files (the editable dedup_lib) do not."""
    script = folder / "executor-python"
    packages = sysconfig.get_paths()["purelib"]
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{packages}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -S "$@"\n'
    )
    script.chmod(0o755)
    return script


def _archive() -> str:
    """The JVM option that starts a cluster JVM from the run's class-data archive (its class
    path is a local driver's), when there is one to read: each starts some 13 s sooner."""
    found = class_data_options(check_java())
    return " ".join(o for o in found if o.startswith("-XX:SharedArchiveFile="))


def _environment(folder: Path, python: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLIENT_VARIABLES}
    env.update(
        SPARK_DAEMON_JAVA_OPTS=f"{_archive()} {os.environ['SPARK_SUBMIT_OPTS']}".strip(),
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOG_DIR=str(folder),
        SPARK_PID_DIR=str(folder),
        SPARK_WORKER_DIR=str(folder / "work"),
        SPARK_NO_DAEMONIZE="1",
        PYSPARK_PYTHON=str(python),
        PYSPARK_DRIVER_PYTHON=str(python),
    )
    return env


def _wait(
    cluster: Cluster,
    name: str,
    ready: Callable[[], bool],
    what: str,
    timeout: float = START_TIMEOUT,
) -> None:
    """Wait until ``ready()``; a part that exits or takes too long fails with its log."""
    process = cluster.processes[name]
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None:
            raise ClusterError(
                f"the {name} exited ({process.returncode}) before {what}; log: {cluster.log(name)}"
            )
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the {name}: no {what} in {timeout:.0f} s; log: {cluster.log(name)}"
            )
        time.sleep(0.5)


def _start(cluster: Cluster, name: str, command: list[str], env: dict[str, str]) -> None:
    with cluster.log(name).open("wb") as out:
        process = subprocess.Popen(
            command,
            env=env,
            cwd=cluster.folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    cluster._started(name, process)


def start(
    folder: Path = FOLDER,
    *,
    master_port: int | None = None,
    connect_port: int | None = None,
    cores: int = 4,
    memory: str = "4g",
) -> Cluster:
    """Start master, worker and Connect server, each waited for; on any failure what was
    started is stopped and the error names the log to read. The worker and the Connect server
    start side by side once the master listens: neither needs the other to start."""
    connect_jar()
    _no_leftovers(folder)
    master_port = master_port or _port(PORT_VARIABLES[0])
    connect_port = connect_port or _port(PORT_VARIABLES[1])
    for port in (master_port, connect_port):
        if _port_open(port):
            raise ClusterError(
                f"{HOST}:{port} is taken (another Spark?): stop it, or move the cluster's ports "
                f"with {' and '.join(PORT_VARIABLES)}"
            )
    folder.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(folder, master_port, connect_port)
    env = _environment(folder, _executor_python(folder))
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    try:
        _start(
            cluster,
            "master",
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST,
             "--port", str(master_port), "--webui-port", str(free_port())],
            env,
        )  # fmt: skip
        _wait(cluster, "master", lambda: _port_open(master_port), f"port {master_port}")
        _start(
            cluster,
            "worker",
            [spark_class, "org.apache.spark.deploy.worker.Worker", cluster.master,
             "--host", HOST, "--cores", str(cores), "--memory", memory,
             "--webui-port", str(free_port()), "--work-dir", str(folder / "work")],
            env,
        )  # fmt: skip
        _start(
            cluster,
            "connect",
            [str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--wait",
             "--master", cluster.master,
             "--properties-file", str(SPARK_DEFAULTS),
             "--conf", f"spark.connect.grpc.binding.address={HOST}",
             "--conf", f"spark.connect.grpc.binding.port={connect_port}",
             "--conf", f"spark.driver.host={HOST}",
             "--conf", f"spark.driver.bindAddress={HOST}",
             "--conf", f"spark.ui.port={free_port()}",
             "--conf", f"spark.pyspark.python={env['PYSPARK_PYTHON']}",
             "--conf", "spark.executor.memory=2g",
             *server_options(str(jar_path())),
             "--conf", f"spark.cores.max={cores // 2}",
             "--driver-memory", "2g",
             *(["--driver-java-options", env["SPARK_DAEMON_JAVA_OPTS"]]
               if env["SPARK_DAEMON_JAVA_OPTS"] else [])],
            env,
        )  # fmt: skip
        _wait(
            cluster,
            "worker",
            lambda: "Successfully registered with master" in _text(cluster.log("worker")),
            "registration with the master",
        )
        _wait(cluster, "connect", lambda: serving(cluster), f"serving on port {connect_port}")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def serving(cluster: Cluster) -> bool:
    """Whether the Connect server serves: it says so in its log, and its port is open. The
    port alone may be another process's, which took it before the server could (and then a
    client's first call waits forever)."""
    started = CONNECT_STARTED in _text(cluster.log("connect"))
    return started and _port_open(cluster.connect_port)


def _port(variable: str) -> int:
    """The port ``variable`` names, else one found free now (:func:`dedup_lib.spark.free_port`):
    as the cluster starts, not when this module was imported, minutes of other servers before."""
    return int(os.environ.get(variable) or free_port())


def _no_leftovers(folder: Path) -> None:
    """A run that was killed before it could stop its cluster left its pids: say which are
    still running rather than start a second cluster beside them."""
    pids_file = folder / "pids.json"
    try:
        pids: dict[str, int] = json.loads(pids_file.read_text())
    except (OSError, ValueError):
        return
    left = {name: pid for name, pid in pids.items() if alive(pid)}
    if left:
        listed = ", ".join(f"{name} {pid}" for name, pid in left.items())
        raise ClusterError(
            f"a previous run left {listed} running ({pids_file}): stop them "
            "(kill -- -PID) and delete that file"
        )
    pids_file.unlink()


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


@contextlib.contextmanager
def running(folder: Path = FOLDER, **options: object) -> Iterator[Cluster]:
    """A started cluster for the ``with`` block, stopped after it however it ends."""
    cluster = start(folder, **options)  # type: ignore[arg-type]
    try:
        yield cluster
    finally:
        cluster.stop()


def client_environment(remote: str | None) -> dict[str, str]:
    """The environment of a client the tests start: this process's without its Spark, with the
    run's Spark defaults and configuration folder (the class path, and so the class-data
    archive, is then the run's) and its JVM scratch (conftest.py), this checkout's ``src``
    and, when given, ``SPARK_REMOTE``."""
    kept = ("SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "SPARK_LOCAL_DIRS", "SPARK_SUBMIT_OPTS")
    env = {
        k: v for k, v in os.environ.items() if k in kept or not k.startswith(("SPARK_", "PYSPARK_"))
    }
    env.update(PYTHONPATH=SRC, DEDUP_LOG_DIR=str(FOLDER / "client-log"), DEDUP_DRIVER_MEMORY="2g")
    if remote is not None:
        env["SPARK_REMOTE"] = remote
    return env


def _simulate(source: str, options: list[str], kernel: str, out: str) -> list[str]:
    """``dedup-lib simulate``'s arguments: ``source`` with ``options`` and the replay
    ``kernel``, its verdicts to ``out``."""
    return ["simulate", source, *options, "--kernel", kernel, "--out", out, "--overwrite"]


def simulate(out: str, kernel: str, remote: str) -> subprocess.CompletedProcess[str]:
    """``dedup-lib simulate`` of the incident, partitioned, with the replay ``kernel``, on the
    Connect server ``remote``; its verdicts to ``out``. Fails the test, naming the cluster's
    logs, unless it exits 0."""
    run = subprocess.run(
        [sys.executable, "-m", "dedup_lib", *_simulate(INPUT, ["--partitioning"], kernel, out)],
        cwd=ROOT, env=client_environment(remote), capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, f"{run.stderr}\n(cluster logs: {FOLDER})"
    return run


#: Run by a child Python: each ``dedup-lib`` command line of the JSON list in its first
#: argument in turn, in this one process; each one's stdout, as a JSON list, on the last line.
IN_ONE_PROCESS = """\
import contextlib, io, json, sys
from dedup_lib.cli import main

printed = []
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    if code:
        sys.exit(f"exit {code}: dedup-lib {' '.join(argv)}")
    printed.append(out.getvalue())
print(json.dumps(printed))
"""


def simulate_locally(*runs: tuple[str, list[str], str]) -> list[str]:
    """``dedup-lib simulate`` of each ``(source, options, out)`` with the JVM replay kernel on a
    local master, in one child Python: the local runs are what the cluster's are compared with,
    and one JVM, warm for the second, saves a cold start. What each printed (its report).
    Fails the test unless every run exits 0."""
    argvs = [
        [*_simulate(source, options, "jvm", out), "--master", "local[2]"]
        for source, options, out in runs
    ]
    done = subprocess.run(
        [sys.executable, "-c", IN_ONE_PROCESS, json.dumps(argvs)], cwd=ROOT,
        env=client_environment(None), capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed: list[str] = json.loads(done.stdout.splitlines()[-1])
    return printed


def verdicts_of(path: Path) -> pd.DataFrame:
    """The verdict columns, one row per send, in one order: a multiset compared as a frame."""
    frame = pd.read_parquet(path, columns=list(VERDICT_COLUMNS))
    # Spark's Parquet keeps UTC instants, pandas' own naive UTC times: one spelling for both.
    frame["original_send_time"] = pd.to_datetime(frame["original_send_time"], utc=True)
    return frame.sort_values("event_id", kind="stable").reset_index(drop=True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.perf_counter()
    try:
        with running() as cluster:
            print(f"started in {time.perf_counter() - started:.0f} s; logs in {cluster.folder}")
            print(f"SPARK_REMOTE={cluster.remote}  (Ctrl-C stops it)", flush=True)
            while all(p.poll() is None for p in cluster.processes.values()):
                time.sleep(1)
            print("a part of the cluster exited; stopping the rest", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except ClusterError as exc:
        print(f"cluster_kit: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
