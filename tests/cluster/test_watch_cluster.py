"""``dedup-lib watch --state executors`` on a real standalone cluster (:mod:`cluster_kit`), as
a classic application beside the Connect server's, with Spark's default executor memory
(1 GiB) and a 1 GiB driver: two hours of the day sample land file by file (:mod:`landing_kit`:
sends delayed within the lateness, some hours late), each entity with its own settings, while
one monitor runs as a service runs it, stopped by SIGTERM at the end. Each file lands once the
one before is judged as far as its watermark allows, so that the late sends are those the files
make late. The state lives in Spark's state store on the cluster's executor; every on-time send
at or below the final watermark gets the verdict the local batch replay gives it, once, and
every send that landed behind the watermark is ``late``, with the watermark it missed. (A
restart on the same checkpoint is the chaos test's, tests/cli/test_watch_executors.py: an
application each way costs the cluster a minute a file.)"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from cluster_kit import FOLDER, ROOT, VERDICT_COLUMNS, Cluster, client_environment
from landing_kit import LATENESS, land
from watch_kit import judged, lines_of

pytestmark = pytest.mark.cluster


@contextlib.contextmanager
def _watching(cluster: Cluster, folder: Path, entities: str) -> Iterator[subprocess.Popen[str]]:
    """``watch`` over ``folder``'s landing on the cluster's master, running until the block
    ends, then stopped by SIGTERM: it must exit 0."""
    env = {**client_environment(None), "DEDUP_DRIVER_MEMORY": "1g"}
    errors = folder / "watch.stderr"
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "dedup_lib", "watch", str(folder / "landing"),
             "--master", cluster.master, "--state", "executors", "--entities", entities,
             "--lateness", "PT2M", "--every", "1",
             "--out", str(folder / "verdicts"), "--checkpoint", str(folder / "checkpoint")],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
            start_new_session=True,
        )  # fmt: skip
    printed: list[str] = []
    reader = lines_of(process, printed)
    try:
        yield process
        process.send_signal(signal.SIGTERM)
        code = process.wait(120)
        assert code == 0, f"{errors.read_text()[-3000:]}\n(cluster logs: {FOLDER})"
        assert any("state on the executors" in line for line in printed), printed
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(60)
        reader.join(10)


def _judged_by(files: list[pd.DataFrame], late: set[int], on_time: pd.DataFrame) -> int:
    """The sends judged once ``files`` have landed and been read: the late ones, and the
    on-time ones at or below the watermark the files make or decided by the rules alone
    (rejected, or with a reason) above it."""
    landed = pd.concat(files)
    micros = landed["send_time"].astype("datetime64[us]").astype("int64")
    lateness_ms = int(LATENESS.total_seconds() * 1000)
    watermark = (int(micros.max()) // 1000 - lateness_ms) * 1000
    ids = landed["event_id"]
    decided = set(on_time.loc[(on_time["verdict"] == "rejected") | on_time["reason"].notna(),
                              "event_id"])  # fmt: skip
    due = ~ids.isin(late) & ((micros <= watermark) | ids.isin(decided))
    return int(due.sum()) + int(ids.isin(late).sum())


def _wait_for(process: subprocess.Popen[str], folder: Path, count: int) -> None:
    """Until ``count`` sends have verdicts; the monitor must not stop meanwhile."""
    deadline = time.monotonic() + 300
    while judged(folder / "verdicts") < count:
        assert process.poll() is None, (folder / "watch.stderr").read_text()[-3000:]
        assert time.monotonic() < deadline, f"not {count} sends judged in 300 s"
        time.sleep(0.5)


def _applications() -> dict[str, str]:
    """The worker's applications so far, with the heap its executor was launched with."""
    found = {}
    for log in sorted((FOLDER / "work").glob("app-*/*/stderr")):
        heap = re.search(r"-Xmx(\w+)", log.read_text(errors="replace"))
        found[log.parent.parent.name] = heap.group(1) if heap else "?"
    return found


def test_the_state_on_the_cluster_s_executors_gives_the_batch_replay_s_verdicts(
    day_landed, cluster: Cluster
) -> None:
    folder = FOLDER / "watch"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "landing").mkdir(parents=True)
    before = set(_applications())
    with _watching(cluster, folder, day_landed.entities) as process:
        for i, sends in enumerate(day_landed.files):
            land(sends, folder / "landing", i)
            count = _judged_by(day_landed.files[: i + 1], day_landed.late, day_landed.verdicts)
            _wait_for(process, folder, count)
    # One application, whose executor had Spark's default heap.
    runs = {app: heap for app, heap in _applications().items() if app not in before}
    assert list(runs.values()) == ["1024M"], runs

    got = pd.read_parquet(folder / "verdicts")
    assert got["event_id"].is_unique, "a send was judged twice"
    is_late = got["verdict"] == "late"
    assert set(got.loc[is_late, "event_id"]) == day_landed.late
    missed = got.loc[is_late, "missed_watermark"].astype("datetime64[us]").astype("int64")
    times = got.loc[is_late, "send_time"].astype("datetime64[us]").astype("int64")
    assert (times <= missed).all()

    judged_ = got[~is_late][list(VERDICT_COLUMNS)].copy()
    judged_["original_send_time"] = pd.to_datetime(judged_["original_send_time"], utc=True)
    judged_ = judged_.sort_values("event_id").reset_index(drop=True)
    want = day_landed.verdicts
    micros = pd.concat(day_landed.files)[["event_id", "send_time"]].set_index("event_id")
    due = micros["send_time"].astype("int64") <= day_landed.final
    due_ids = set(micros.index[due]) - day_landed.late
    assert due_ids <= set(judged_["event_id"]), "on-time sends never judged"
    right = want[want["event_id"].isin(judged_["event_id"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(judged_, right, check_dtype=False)
    assert (judged_["verdict"] == "duplicate").sum() > 50
