from __future__ import annotations

import shlex
import socket
import sys

import pytest

from dedup_lib.cli import doctor, main
from dedup_lib.replay.kernels import jvm
from dedup_lib.workbench import notebooks
from fakes import fake_java


def lines(out: str) -> dict[str, str]:
    """The doctor's lines by what they check: 'ok', 'note' or 'error' and the text."""
    found = {}
    for line in out.splitlines():
        status, what = line[:5].strip(), line[6:19].strip()
        found[what] = f"{status} {line[20:]}"
    return found


def test_a_healthy_machine_passes_with_one_line_per_check(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEDUP_LIB_CACHE", str(tmp_path))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert main(["doctor"]) == 0
    found = lines(capsys.readouterr().out)
    assert list(found) == ["java", "replay kernel", "jupyter", "spark"]
    assert found["java"].startswith("ok Java ")
    assert found["replay kernel"] == f"ok JVM kernel {jvm.jar_path()}"
    assert found["jupyter"].startswith("ok kernel 'dedup-lib' (dedup-lib (Spark)) runs ")


def test_old_java_is_an_error_with_what_to_do_and_no_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "11.0.2"')))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert main(["doctor", "--no-jupyter"]) == 1
    out = capsys.readouterr()
    found = lines(out.out)
    assert found["java"].startswith("error dedup_lib needs Java 17+ for local Spark")
    assert "apt-get install openjdk-17" in found["java"]
    assert "Traceback" not in out.out + out.err


def test_without_javac_the_python_kernel_is_a_note(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DEDUP_LIB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr(jvm, "_javac", lambda: None)
    assert main(["doctor", "--no-jupyter"]) == 0
    found = lines(capsys.readouterr().out)
    assert found["replay kernel"].startswith("note the Python kernel will run")
    assert "no `javac`" in found["replay kernel"]


def test_a_missing_jupyter_kernel_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(doctor, "KERNEL_NAME", "no-such-kernel")
    check = doctor.jupyter_kernel()
    assert check.status == "error"
    assert "ipykernel install --user --name" in check.text
    # this interpreter, by its whole path, which a shell runs as the command says
    command = shlex.split(check.text.partition(": ")[2])
    assert command[:3] == [sys.executable, "-m", "ipykernel"]
    assert command[-2:] == ["--display-name", notebooks.KERNEL_DISPLAY]


@pytest.fixture
def listening() -> int:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_a_spark_connect_server_that_answers(listening):
    check = doctor.spark_connect(f"sc://127.0.0.1:{listening}")
    assert (check.status, check.text) == ("ok", f"Spark Connect at 127.0.0.1:{listening} answers")


def test_a_spark_connect_server_that_does_not_answer_is_an_error(capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["doctor", "--no-jupyter", "--remote", f"sc://127.0.0.1:{port}"]) == 1
    found = lines(capsys.readouterr().out)
    assert found["spark"].startswith(f"error Spark Connect at 127.0.0.1:{port} does not answer")
    assert "unset SPARK_REMOTE" in found["spark"]
