"""``dedup-lib explore``: its options, and every error it gives before Voilà starts."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from dedup_lib.cli import explore, main, parser

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "samples"
DAY = str(SAMPLES / "day.parquet")


def _never_started(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("Voila was started")

    monkeypatch.setattr(subprocess, "Popen", fail)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explore", "/no/such/sends.parquet"], "/no/such/sends.parquet does not exist"),
        (["explore", DAY, "--window", "PT1S"], "--window 'PT1S': The value supplied must be"),
        (["explore", DAY, "--window", "soon"], "--window 'soon':"),
        (["explore", DAY, "--map", "message_id"], "--map 'message_id': expected SOURCE=CANONICAL"),
    ],
)
def test_bad_input_fails_in_one_line_before_voila_starts(monkeypatch, capsys, argv, message):
    _never_started(monkeypatch)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"dedup-lib explore: error: {message}")


def test_a_port_in_use_fails_before_voila_starts(monkeypatch, capsys):
    _never_started(monkeypatch)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["explore", DAY, "--port", str(port)]) == 1
    assert f"--port {port}: cannot listen there" in capsys.readouterr().err


def test_without_voila_it_says_how_to_install(monkeypatch, capsys):
    _never_started(monkeypatch)
    real = explore.importlib.util.find_spec
    monkeypatch.setattr(
        explore.importlib.util, "find_spec", lambda name: None if name == "voila" else real(name)
    )
    assert main(["explore", DAY]) == 1
    assert "pip install 'dedup-lib[explore]'" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_bad_port_is_a_usage_error(capsys, port):
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(["explore", DAY, "--port", port])
    assert stop.value.code == 2
    assert "--port" in capsys.readouterr().err


def test_the_page_gets_its_parameters_from_the_environment(monkeypatch):
    monkeypatch.chdir(SAMPLES)
    options = ["--window", "PT1M", "--partitioning", "--format", "parquet"]
    named = ["--map", "Id=message_id", "--map", "a=b=send_time", "--entity", "orders"]
    args = parser().parse_args(["explore", "day.parquet", *options, *named])
    args.remote = "sc://spark:15002"
    env = explore.page_environment(args, "s3cret")
    assert env["DEDUP_EXPLORE_INPUT"] == DAY
    assert env["DEDUP_EXPLORE_LABEL"] == "day.parquet"
    assert env["DEDUP_EXPLORE_WINDOW"] == "PT1M"
    assert env["DEDUP_EXPLORE_PARTITIONING"] == "1"
    assert env["DEDUP_EXPLORE_FORMAT"] == "parquet"
    assert json.loads(env["DEDUP_EXPLORE_MAP"]) == {"Id": "message_id", "a=b": "send_time"}
    assert env["DEDUP_EXPLORE_ENTITY"] == "orders"
    assert env["SPARK_REMOTE"] == "sc://spark:15002"
    command = explore.voila_command("page.ipynb", 8870)
    assert command[:4] == [sys.executable, "-m", "voila", "page.ipynb"]
    assert {"--port=8870", "--Voila.ip=127.0.0.1", "--strip_sources=True", "--no-browser"} <= set(
        command
    )
    # the token reaches Voila in its environment, which only this user can read, and Voila
    # takes it (auto_token): not on the command line, which every user of the machine can
    assert env["JUPYTER_TOKEN"] == "s3cret"
    assert "--Voila.auto_token=True" in command
    assert not any("s3cret" in part for part in command)


def test_where_spark_listens_reaches_the_kernels(monkeypatch):
    """``--driver-host`` and ``--spark-ui`` reach the page's kernels, whose get_spark reads
    them; without them, nothing is set: each kernel's Spark listens on 127.0.0.1."""
    for name in ("DEDUP_SPARK_DRIVER_HOST", "DEDUP_SPARK_UI"):
        monkeypatch.delenv(name, raising=False)
    args = parser().parse_args(["explore", DAY])
    env = explore.page_environment(args, "t")
    assert "DEDUP_SPARK_DRIVER_HOST" not in env
    assert "DEDUP_SPARK_UI" not in env
    args = parser().parse_args(
        ["explore", DAY, "--driver-host", "10.0.0.5", "--spark-ui", "127.0.0.1:4050"]
    )
    env = explore.page_environment(args, "t")
    assert env["DEDUP_SPARK_DRIVER_HOST"] == "10.0.0.5"
    assert env["DEDUP_SPARK_UI"] == "127.0.0.1:4050"


@pytest.mark.parametrize(
    ("given", "remote"),
    [
        ("abfss://sends@acct.dfs.core.windows.net/day.parquet", None),
        ("dbfs:/mnt/sends/day.parquet", "sc://spark:15002"),
        ("cluster-only/day.parquet", "sc://spark:15002"),
    ],
)
def test_a_path_for_the_cluster_reaches_the_page_as_written(monkeypatch, tmp_path, given, remote):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    args = parser().parse_args(["explore", given])
    args.remote = remote
    assert explore.page_environment(args, "t")["DEDUP_EXPLORE_INPUT"] == given


def test_the_page_reads_every_parameter_the_command_passes():
    page = json.loads(explore.EXPLORER.read_text(encoding="utf-8"))
    source = "".join("".join(cell["source"]) for cell in page["cells"])
    for name in ("INPUT", "LABEL", "WINDOW", "PARTITIONING", "FORMAT", "MAP", "ENTITY"):
        assert f'"DEDUP_EXPLORE_{name}"' in source
    assert "load_telemetry(spark, INPUT, format=FORMAT, mapping=MAPPING, entity=ENTITY)" in source
    assert "WindowExplorer.from_frame(" in source
    assert ".widget" in source
    assert page["metadata"]["title"] == "dedup-lib window explorer"


def test_help_documents_the_command():
    text = parser()._subparsers._group_actions[0].choices["explore"].format_help()  # type: ignore[union-attr]
    for option in ("--window", "--partitioning", "--format", "--map", "--entity", "--port"):
        assert option in text
    for option in ("--driver-host", "--spark-ui"):
        assert option in text
    assert "Voilà" in text
    assert "dedup-lib explore data/samples/day.parquet" in text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_what_it_starts_dies_with_it_even_of_sigkill(tmp_path):
    """Voilà, started through :func:`explore.dying_with_parent`, is the command itself (exec,
    same process) and gets SIGTERM when the command dies of a signal no handler sees."""
    import signal
    import time

    parent = (
        "import subprocess, sys, time; from dedup_lib.cli.explore import dying_with_parent; "
        "child = subprocess.Popen(dying_with_parent(['sleep', '120'])); "
        "print(child.pid, flush=True); time.sleep(120)"
    )
    process = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    child = int(process.stdout.readline())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":
        assert time.monotonic() < deadline, "the command was never exec'd"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and b"Z" not in _state(child):
        assert time.monotonic() < deadline, "the command outlived its parent"
        time.sleep(0.05)


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return b"Z"
