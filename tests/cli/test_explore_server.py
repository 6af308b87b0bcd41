"""``dedup-lib explore`` running: the page only for whoever has the token, nothing of it open to
the network (Voila, its kernel and its Spark JVM listen on loopback only), and nothing left
running however the command is stopped (Ctrl-C, SIGTERM, SIGHUP, SIGKILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from listeners_kit import assert_on_loopback, listeners
from serve_kit import PROC, Served, get, refused_without_its_token, serve

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not (PROC / "self" / "environ").exists(), reason="reads /proc (Linux)"),
]

#: Sends as an export names them, which the page reads with the command's --map and --entity.
SENDS = "Id,Enqueued\na,2026-11-03T20:00:00Z\na,2026-11-03T20:00:05Z\n"
NAMED = ("--map", "Id=message_id", "--map", "Enqueued=send_time", "--entity", "orders")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    sends = tmp_path / "sends.csv"
    sends.write_text(SENDS)
    with serve(sends, *NAMED) as server:
        yield server


def _page_with_spark(served: Served) -> None:
    """The page opened with its token: its kernel runs, with its Spark JVM, and shows the
    explorer (no error: the columns mapped as the command said); every socket of theirs and
    Voila's that listens (the driver, the block manager, Spark's UI) on loopback."""
    status, _, body = get(served.url)
    assert status == 200
    assert "Duplicate detection window explorer" in body
    assert "dedup-explore-error" not in body, body[body.find("dedup-explore-error") :][:400]
    assert "application/vnd.jupyter.widget-view+json" in body
    running = served.processes()
    assert any("ipykernel" in p for p in running), running
    assert any("java" in p for p in running), running
    assert_on_loopback(listeners(served.process.pid))


@pytest.mark.parametrize("stop", [signal.SIGHUP, signal.SIGKILL], ids=str)
def test_the_page_needs_its_token_listens_on_loopback_only_and_a_signal_stops_everything(
    served: Served, stop: signal.Signals
) -> None:
    """Without the token: no page, no kernel. With it: the page, its kernel and Spark, all
    listening on loopback only (the check ``tests/test_listeners.py`` makes of ``watch``,
    made here on a server that runs anyway). Then the signal: the command exits (0 but for
    SIGKILL, which nothing catches) and Voila, the kernel and its JVM are gone. SIGHUP
    reaches the handler SIGTERM does (``STOP_SIGNALS``), whose stopping of a kernel and its
    JVM ``tests/browser/test_explore_page.py`` shows, at the end of a colleague's visit: it is
    sent before the page is opened, so that no other Spark starts to show the same."""
    refused_without_its_token(served)
    if stop != signal.SIGHUP:
        _page_with_spark(served)
    served.process.send_signal(stop)
    assert served.process.wait(timeout=60) == (-stop if stop == signal.SIGKILL else 0)
    if stop != signal.SIGKILL:
        assert f"stopped ({stop.name})" in served.stderr()
    assert served.left_after() == []


#: A test run that starts a server and is then killed, before any teardown runs.
KILLED_RUN = """
import sys, time
from pathlib import Path
from serve_kit import serve
with serve(Path(sys.argv[1])) as served:
    print(served.mark, flush=True)
    time.sleep(600)
"""


def test_a_test_run_killed_mid_test_leaves_no_server_behind(tmp_path: Path) -> None:
    """The kit starts ``explore`` to get SIGTERM when the test run dies, even of SIGKILL:
    a killed run's teardown never runs, and its server, Voila and kernels stayed."""
    sends = tmp_path / "sends.csv"
    sends.write_text(SENDS)
    tests = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]),
        "TMPDIR": str(tmp_path),  # the kit's folder, which the killed run cannot remove
    }
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(sends)], env=env, stdout=subprocess.PIPE, text=True
    )
    mark = (run.stdout.readline() if run.stdout else "").strip()
    server = Served(run, "", mark, tmp_path / "unused.log")
    assert mark
    assert server.processes(), "the server did not start"
    run.kill()
    run.wait(timeout=60)
    assert server.left_after() == []
