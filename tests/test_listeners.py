"""Nothing a ``dedup-lib`` command starts is open to the network by default: every TCP socket
that listens and every UDP socket that is bound, IPv4 and IPv6, of ``watch`` and all it starts
(Spark's driver JVM, a local Connect server), is on loopback (127.0.0.0/8, ::1), read from
``/proc`` (:mod:`listeners_kit`): here on Spark Connect; on classic Spark, by the chaos test's
restarted monitor (``tests/cli/test_watch_executors.py``, the library's defaults) and the
unit's (``tests/cli/test_watch_service.py``, with ``SPARK_LOCAL_IP`` as the unit sets it).
``explore``'s, with Voila, its kernel and its JVM, are checked on the server
``tests/cli/test_explore_server.py`` starts. And the options that ask
otherwise (``--driver-host``, ``--spark-ui``), as the commands pass them on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dedup_lib import sample_path
from dedup_lib.cli import parser, terminal
from dedup_lib.spark import free_port
from listeners_kit import assert_on_loopback, listeners, reads_proc


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    folder = tmp_path / "landing"
    folder.mkdir()
    shutil.copy(sample_path("incident.parquet"), folder / "incident.parquet")
    return folder


def _first_line(process: subprocess.Popen[str], err: Path, seconds: float = 240) -> str:
    """The first line the command prints (its first micro-batch's), read on a thread."""
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        lines.extend(line for line in process.stdout if line.strip())

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + seconds
    while not lines:
        if process.poll() is not None:
            said = err.read_text(errors="replace")[-2000:]
            pytest.fail(f"watch exited {process.returncode} before a micro-batch: {said}")
        assert time.monotonic() < deadline, f"no micro-batch in {seconds:.0f} s: {err.read_text()}"
        time.sleep(0.2)
    return lines[0]


@pytest.fixture
def watching(landing: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """``watch`` on a local Spark Connect server it starts."""
    argv = [
        sys.executable, "-m", "dedup_lib", "watch", str(landing),
        "--out", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
        "--every", "0.5", "--remote", "local[1]", "--metrics", f"127.0.0.1:{free_port()}",
    ]  # fmt: skip
    env = {**os.environ, "DEDUP_DRIVER_MEMORY": "1g"}
    env.pop("SPARK_REMOTE", None)
    with (tmp_path / "stderr.log").open("w") as err:
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait(60)


@pytest.mark.spark  # starts Spark in a child process
@reads_proc
def test_watch_listens_on_loopback_only(watching: subprocess.Popen[str], tmp_path: Path) -> None:
    """The monitor, its first micro-batch done: its metrics, Spark's driver and block
    manager, and the local Connect server, on loopback (no UI: the next test's)."""
    assert "sends judged" in _first_line(watching, tmp_path / "stderr.log")
    assert_on_loopback(listeners(watching.pid))


@pytest.mark.parametrize(
    ("given", "wanted"),
    [("127.0.0.1:4040", "127.0.0.1:4040"), ("[::1]:0", "[::1]:0"), (" OFF ", "off")],
)
def test_spark_ui_takes_an_address_with_its_port_or_off(given: str, wanted: str) -> None:
    args = parser().parse_args(["simulate", "in.parquet", "--spark-ui", given])
    assert args.spark_ui == wanted


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--spark-ui", "4040"),
        ("--spark-ui", "0.0.0.0"),
        ("--spark-ui", "host:65536"),
        ("--spark-ui", "a b:4040"),
        ("--driver-host", "a b"),
        ("--driver-host", ""),
    ],
)
def test_a_bad_address_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(["simulate", "in.parquet", option, value])
    assert stop.value.code == 2
    assert option in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "ui"),
    [
        (["simulate", "in.parquet"], None),
        (["watch", "in", "--out", "o", "--checkpoint", "c"], "off"),
        (
            ["watch", "in", "--out", "o", "--checkpoint", "c", "--spark-ui", "127.0.0.1:0"],
            "127.0.0.1:0",
        ),
        (["simulate", "in.parquet", "--spark-ui", "off"], "off"),
    ],
)
def test_the_commands_pass_where_spark_listens(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], ui: str | None
) -> None:
    """Spark's UI on loopback (get_spark's default) but for watch, which has none unless
    ``--spark-ui`` asks; ``--driver-host`` as given."""
    given: dict[str, object] = {}
    monkeypatch.setattr(terminal, "get_spark", lambda *a, **kw: given.update(kw) or object())
    args = parser().parse_args([*argv, "--driver-host", "10.0.0.5"])
    args.spark = None
    terminal.start_spark(args, ui=args.command != "watch")
    assert given["ui"] == ui
    assert given["driver_host"] == "10.0.0.5"
