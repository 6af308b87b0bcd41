"""``dedup-lib watch --state executors`` as a service manager runs it: beside a rotating Collector,
killed with SIGKILL at a random moment while lines come, started again on its checkpoint, then
stopped with SIGTERM, which exits 0. Every send is judged once, with the batch replay's
verdict, every alert (the sample's rejected sends; its retries with a new MessageId in the
same trace, resends by ``--content trace_id``) written once in the alerts file, and each
counted once by its metrics; what it listens on is on loopback; its checkpoint's files are
renamed without a ``readlink`` process apiece (``CHECKPOINT_FILES``). Spark's state
store and its checkpoint go on where the kill left them, and a micro-batch Spark runs again
replaces its verdicts and its record of counts."""

from __future__ import annotations

import os
import random
import shlex
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from dedup_lib.spark import free_port
from listeners_kit import assert_on_loopback, listeners
from metrics_kit import scrape, summed
from watch_kit import (
    Feed,
    assert_judged_and_alerted_once,
    judged,
    load_expected,
    running,
    wait_until,
)


def _recording_readlink(folder: Path) -> dict[str, str]:
    """An environment whose ``readlink`` (first on PATH) notes each run in ``folder``'s
    ``readlink.log``, then runs the system's."""
    folder.mkdir()
    shim = folder / "readlink"
    log, system = shlex.quote(str(folder / "readlink.log")), shutil.which("readlink")
    shim.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {system} "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def _judged_total(port: int) -> float:
    """The sends the monitor's /metrics says it judged."""
    return summed(scrape(("127.0.0.1", port)), "dedup_sends_judged_total")


def _resends_counted(port: int) -> float:
    """The resend alerts the monitor's /metrics says it raised (once appended to the file)."""
    return summed(scrape(("127.0.0.1", port)), "dedup_alerts_total", kind="resend")


@pytest.mark.slow
def test_killed_and_started_again_it_judges_every_send_once(spark, tmp_path):
    rng = random.Random(12)
    feed = Feed(tmp_path / "landing")
    out = tmp_path / "verdicts"
    port = free_port()
    command = [
        sys.executable, "-m", "dedup_lib", "watch", str(feed.landing), "--format", "otlp",
        "--window", "PT10M", "--lateness", "PT1M", "--state", "executors", "--every", "1",
        "--content", "trace_id",
        "--out", str(out), "--checkpoint", str(tmp_path / "ck"),
        "--alerts", str(tmp_path / "alerts.jsonl"), "--metrics", f"127.0.0.1:{port}",
    ]  # fmt: skip
    env = _recording_readlink(tmp_path / "bin")
    feed.export(50)
    errors = tmp_path / "first.stderr"
    with running(command, errors, env=env) as (first, printed):
        wait_until(first, errors, lambda: any(p.startswith("batch ") for p in printed), "a line")
        feed.export(150)
        time.sleep(rng.uniform(0.2, 4.0))  # anywhere in a plan's staging or a micro-batch
        first.send_signal(signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL
    feed.export(len(feed.lines))
    feed.collector.close()
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(b"\n".join(feed.lines) + b"\n")
    expected = load_expected(spark, whole, command)
    assert len(expected["resent"]) > 100, "the feed must hold resends to alert"
    errors = tmp_path / "restarted.stderr"
    with running(command, errors, env=env) as (restarted, printed):
        due = expected["due"]
        wait_until(restarted, errors, lambda: judged(out) >= due, "every send due judged")
        # A micro-batch's files land before its counters move: each send counted once, the
        # micro-batch the kill cut short included, from the records of the checkpoint.
        wait_until(restarted, errors, lambda: _judged_total(port) >= judged(out), "the counters")
        assert _judged_total(port) == judged(out)
        # The resends' query pairs the copies the judge accepted a trigger or two after it.
        resent, alerts = len(expected["resent"]), tmp_path / "alerts.jsonl"
        wait_until(restarted, errors, lambda: _resends_counted(port) >= resent, "the resends")
        counted = scrape(("127.0.0.1", port))
        # Its metrics, Spark's driver and block manager: on loopback, the query running.
        assert_on_loopback(listeners(restarted.pid))
        restarted.send_signal(signal.SIGTERM)
        assert restarted.wait(120) == 0, errors.read_text()[-3000:]
    assert "rows loaded" in printed[-1]  # the summary: SIGTERM finished the step in hand
    assert_judged_and_alerted_once(out, alerts, expected, counted)
    ran = tmp_path / "bin" / "readlink.log"
    assert not ran.exists(), f"readlink ran {len(ran.read_text().splitlines())} times"
