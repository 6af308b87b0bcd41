"""``dedup-lib watch --state executors`` on a real standalone cluster (:mod:`cluster_kit`), as
a classic application beside the Connect server's, with Spark's default executor memory
(1 GiB) and a 1 GiB driver: two hours of the day sample land file by file (:mod:`landing_kit`:
sends delayed within the lateness, some hours late), each entity with its own settings, and
after each file the command runs ``--once``. The state lives in Spark's state store on the
cluster's executor; every on-time send at or below the final watermark gets the verdict the
local batch replay gives it, once, and every send that landed behind the watermark is
``late``, with the watermark it missed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cluster_kit import FOLDER, ROOT, VERDICT_COLUMNS, Cluster, client_environment
from landing_kit import land

pytestmark = pytest.mark.cluster


def _watch(cluster: Cluster, folder: Path, entities: str) -> subprocess.CompletedProcess[str]:
    """One ``--once`` run over ``folder``'s landing on the cluster's master; fails the test,
    naming the cluster's logs, unless it exits 0."""
    env = {**client_environment(None), "DEDUP_DRIVER_MEMORY": "1g"}
    run = subprocess.run(
        [sys.executable, "-m", "dedup_lib", "watch", str(folder / "landing"),
         "--master", cluster.master, "--state", "executors", "--entities", entities,
         "--lateness", "PT2M", "--once", "--quiet",
         "--out", str(folder / "verdicts"), "--checkpoint", str(folder / "checkpoint")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert run.returncode == 0, f"{run.stderr[-3000:]}\n(cluster logs: {FOLDER})"
    return run


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
    printed = []
    for i, sends in enumerate(day_landed.files):
        land(sends, folder / "landing", i)
        printed.append(_watch(cluster, folder, day_landed.entities).stdout)
    assert "state on the executors" in printed[0], printed
    # Each run an application of its own, whose executor had Spark's default heap.
    runs = {app: heap for app, heap in _applications().items() if app not in before}
    assert list(runs.values()) == ["1024M"] * len(day_landed.files), runs

    got = pd.read_parquet(folder / "verdicts")
    assert got["event_id"].is_unique, "a send was judged twice"
    is_late = got["verdict"] == "late"
    assert set(got.loc[is_late, "event_id"]) == day_landed.late
    missed = got.loc[is_late, "missed_watermark"].astype("datetime64[us]").astype("int64")
    times = got.loc[is_late, "send_time"].astype("datetime64[us]").astype("int64")
    assert (times <= missed).all()

    judged = got[~is_late][list(VERDICT_COLUMNS)].copy()
    judged["original_send_time"] = pd.to_datetime(judged["original_send_time"], utc=True)
    judged = judged.sort_values("event_id").reset_index(drop=True)
    want = day_landed.verdicts
    micros = pd.concat(day_landed.files)[["event_id", "send_time"]].set_index("event_id")
    due = micros["send_time"].astype("int64") <= day_landed.final
    due_ids = set(micros.index[due]) - day_landed.late
    assert due_ids <= set(judged["event_id"]), "on-time sends never judged"
    right = want[want["event_id"].isin(judged["event_id"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(judged, right, check_dtype=False)
    assert (judged["verdict"] == "duplicate").sum() > 50
