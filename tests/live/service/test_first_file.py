"""A monitor started on a folder where nothing has landed yet, as a service manager starts it
before the Collector's first file: it runs, ready, its scans counted and systemd told READY=1,
and it judges the first file when it lands, with the verdicts a monitor started on that file
gives; run once, an empty folder is refused in a sentence. (A folder emptied under a
checkpoint, its files rotated away, is the same start: the restore waits for the next file.)"""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

from dedup_lib import DedupPolicy, sample_path
from dedup_lib.errors import InputError
from dedup_lib.live.options import ReadOptions, ServeOptions, StateOptions, WatchOptions
from dedup_lib.live.service.first_file import FirstFile
from dedup_lib.live.service.metrics import Metrics
from dedup_lib.live.service.notify import Notifier
from dedup_lib.live.watch import watch_duplicates
from dedup_lib.telemetry.landing import NothingLandedError
from metrics_kit import probe, scrape, summed

#: The incident sample's sends a monitor judges from the one file (the rest wait for the
#: watermark): what ``watch_duplicates``' own example counts.
JUDGED = 29_719


class Stub:
    """A runner's face that counts what it is asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.more, self.refused = True, "refused"

    def step(self) -> str:
        self.asked.append("step")
        return "plan"

    def settle(self) -> None:
        self.asked.append("settle")

    def stop(self) -> None:
        self.asked.append("stop")


def test_it_is_ready_and_scans_until_the_runner_starts_then_is_that_runner(manager):
    metrics, runner, starts = Metrics(60.0, 1.0), Stub(), [None, None]
    waiting = FirstFile(
        lambda: starts.pop() if starts else runner, metrics, Notifier(
            {"NOTIFY_SOCKET": manager.getsockname()}), "landing/\x1b[2J"
    )  # fmt: skip
    told = [manager.recv(4096).decode() for _ in range(2)]
    assert told == ["READY=1", "STATUS=waiting for the first file in landing/\\x1b[2J"]
    assert metrics.ready() == (False, "the folder has not been scanned yet")
    assert waiting.step() is None
    assert (waiting.waiting, waiting.more, waiting.refused) == (True, False, None)
    assert metrics.ready() == (True, "ready"), "a quiet folder is no restore"
    waiting.settle()
    waiting.stop()
    assert waiting.step() is None
    assert waiting.step() == "plan"
    assert (waiting.waiting, waiting.more, waiting.refused) == (False, True, "refused")
    waiting.settle()
    waiting.stop()
    assert runner.asked == ["step", "settle", "stop"], "nothing passed on before it started"


def test_run_once_an_empty_folder_is_refused_in_a_sentence(spark, tmp_path):
    (tmp_path / "landing").mkdir()
    (tmp_path / "landing" / ".partial.parquet").write_bytes(b"PAR1")
    with pytest.raises(NothingLandedError, match=r"^watch_duplicates: nothing has landed in .*"
                       r"landing yet$"):  # fmt: skip
        watch_duplicates(
            spark, tmp_path / "landing", out=tmp_path / "out", checkpoint=tmp_path / "ck",
            once=True,
        )  # fmt: skip
    assert not (tmp_path / "ck").exists(), "nothing written"


@pytest.mark.parametrize("reading", [ReadOptions(settle="soon"), ReadOptions(trigger="often")])
def test_a_setting_that_does_not_read_is_refused_at_start_not_at_the_first_file(
    spark, tmp_path, reading
):
    (tmp_path / "landing").mkdir()
    with pytest.raises(InputError, match=r"soon|often"):
        watch_duplicates(
            spark, tmp_path / "landing", out=tmp_path / "out", checkpoint=tmp_path / "ck",
            options=WatchOptions(reading=reading),
        )  # fmt: skip


def _judged(port: int) -> float:
    return summed(scrape(("127.0.0.1", port)), "dedup_sends_judged_total")


@pytest.mark.parametrize("state", ["driver", "executors"])
def test_started_before_the_first_file_it_judges_it_when_it_lands(spark, tmp_path, state):
    landing = tmp_path / "landing"
    landing.mkdir()
    options = WatchOptions(
        reading=ReadOptions(trigger=0.2), serving=ServeOptions("127.0.0.1:0"),
        state=StateOptions(mode=state),
    )  # fmt: skip
    watch: Any = watch_duplicates(
        spark, landing, DedupPolicy("PT10M"), out=tmp_path / "out", checkpoint=tmp_path / "ck",
        options=options,
    )  # fmt: skip
    try:
        port = watch.metrics_address[1]
        assert watch.waiting
        assert watch.active
        assert watch.columns == ()
        time.sleep(0.6)
        assert probe(port, "/-/ready") == (200, "ready\n")
        samples = scrape(("127.0.0.1", port))
        assert summed(samples, "dedup_last_scan_timestamp_seconds") > 1.7e9
        assert summed(samples, "dedup_restoring") == 0
        assert ("dedup_last_landed_timestamp_seconds", ()) not in samples, "nothing landed"
        shutil.copy(sample_path("incident.parquet"), landing / ".incident.parquet")
        (landing / ".incident.parquet").rename(landing / "incident.parquet")
        deadline = time.monotonic() + 180
        while _judged(port) < JUDGED:
            assert time.monotonic() < deadline, (watch.error, _judged(port))
            time.sleep(0.5)
        assert _judged(port) == JUDGED
        assert not watch.waiting
        assert "message_id" in watch.columns
    finally:
        watch.stop()
    assert sum(line.judged for line in watch.lines) == JUDGED
