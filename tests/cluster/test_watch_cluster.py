"""``dedup-lib watch --state executors`` on a real standalone cluster (:mod:`cluster_kit`), as a
classic application beside the Connect server's, with Spark's default executor memory (1 GiB)
and a 1 GiB driver, and through the Connect server (started with the judge's plugin, its Python
without ``dedup_lib``: the verdicts are written there by a function pickled by value, and
counted by the monitor from the folders written): two hours of the day sample land file by file
(:mod:`landing_kit`: sends delayed within the lateness, some hours late), each entity with its
own settings, while one monitor runs as a service runs it, stopped by SIGTERM at the end. Each
file lands once the one before is judged as far as its watermark allows, so that the late sends
are those the files make late. The state lives in Spark's state store on the cluster's executor;
every on-time send at or below the final watermark gets the verdict the local batch replay gives
it, once, and every send that landed behind the watermark is ``late``, with the watermark it
missed; every resend and rejected send is alerted once. Through Connect, the client is killed
with SIGKILL halfway, while a file lands, and started again: the query, the server's, goes on
without it. (A classic restart on the same checkpoint is the chaos test's,
tests/cli/test_watch_executors.py: an application each way costs the cluster a minute a file.)"""

from __future__ import annotations

import contextlib
import json
import random
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
from landing_kit import expected_late, land
from watch_kit import judged, running, wait_until

pytestmark = pytest.mark.cluster


@contextlib.contextmanager
def _watching(
    cluster: Cluster, folder: Path, entities: str, client: str, killed: bool = False
) -> Iterator[subprocess.Popen[str]]:
    """``watch`` over ``folder``'s landing on the cluster (``client``: ``classic`` on its
    master, or ``connect`` through its Connect server), running until the block ends, then
    stopped by SIGTERM: it must exit 0; ``killed``: by SIGKILL, as a crash."""
    env = {**client_environment(None), "DEDUP_DRIVER_MEMORY": "1g"}
    where = ["--master", cluster.master] if client == "classic" else ["--remote", cluster.remote]
    command = [
        sys.executable, "-m", "dedup_lib", "watch", str(folder / "landing"), *where,
        "--state", "executors", "--entities", entities,
        "--lateness", "PT2M", "--every", "1", "--alerts", str(folder / "alerts.jsonl"),
        "--out", str(folder / "verdicts"), "--checkpoint", str(folder / "checkpoint"),
    ]  # fmt: skip
    errors = folder / "watch.stderr"
    with running(command, errors, cwd=ROOT, env=env) as (process, printed):
        yield process
        process.send_signal(signal.SIGKILL if killed else signal.SIGTERM)
        code = process.wait(120)
        if killed:
            assert code == -signal.SIGKILL
            return
        assert code == 0, f"{errors.read_text()[-3000:]}\n(cluster logs: {FOLDER})"
        assert any("state on the executors" in line for line in printed), printed


def _resends(judged: pd.DataFrame) -> dict[str, str]:
    """Each accepted send whose content (``payload_hash``) its entity accepted within the hour
    before it, with that copy's event id: the resends the monitor alerts."""
    accepted = judged[(judged["verdict"] == "accepted") & judged["payload_hash"].notna()]
    accepted = accepted.sort_values(["entity", "payload_hash", "send_time", "event_id"])
    same = accepted[["entity", "payload_hash"]].eq(accepted[["entity", "payload_hash"]].shift())
    gap = accepted["send_time"].diff().dt.total_seconds()
    found = same.all(axis=1) & (gap <= 3600)
    before = accepted["event_id"].shift()[found].astype("int64")
    return dict(zip(accepted["event_id"][found].astype(str), before.astype(str), strict=True))


def _alerted(path: Path, kind: str) -> list[dict]:
    """The alerts of ``kind`` in the alerts file at ``path`` (none before it is written), its
    whole lines only (the monitor may be appending)."""
    text = path.read_text() if path.exists() else ""
    lines = text[: text.rfind("\n") + 1].splitlines()
    return [a for line in lines if (a := json.loads(line))["kind"] == kind]


def _judged_by(files: list[pd.DataFrame], on_time: pd.DataFrame) -> int:
    """The sends judged once ``files`` have landed and been read: the late ones, and the
    on-time ones at or below the watermark the files make (:func:`landing_kit.expected_late`)
    or decided by the rules alone (rejected, or with a reason) above it."""
    landed = pd.concat(files)
    file_of = pd.Series([i for i, f in enumerate(files) for _ in range(len(f))], landed.index)
    late, watermark = expected_late(landed, file_of)
    micros = landed["send_time"].astype("datetime64[us]").astype("int64")
    ids = landed["event_id"]
    decided = (on_time["verdict"] == "rejected") | on_time["reason"].notna()
    waits = ~ids.isin(on_time.loc[decided, "event_id"]) & (micros > watermark)
    return int((~ids.isin(late) & ~waits).sum()) + len(late)


def _applications() -> dict[str, str]:
    """The worker's applications so far, with the heap its executor was launched with."""
    found = {}
    for log in sorted((FOLDER / "work").glob("app-*/*/stderr")):
        heap = re.search(r"-Xmx(\w+)", log.read_text(errors="replace"))
        found[log.parent.parent.name] = heap.group(1) if heap else "?"
    return found


@pytest.mark.parametrize("client", ["classic", "connect"])
def test_the_state_on_the_cluster_s_executors_gives_the_batch_replay_s_verdicts(
    day_landed, cluster: Cluster, client: str
) -> None:
    folder = FOLDER / f"watch-{client}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "landing").mkdir(parents=True)
    before = set(_applications())
    out, errors, alerts = folder / "verdicts", folder / "watch.stderr", folder / "alerts.jsonl"
    files, crash = day_landed.files, random.Random(71)

    def landed(process: subprocess.Popen[str], upto: int, start: int = 0) -> None:
        """Files ``start`` to ``upto`` landed, each once the one before is judged (those
        before ``start`` too: read with the next, a file's late sends would not be)."""
        for i in range(start, upto + 1):
            count = _judged_by(files[:i], day_landed.verdicts) if i else 0
            wait_until(process, errors, lambda n=count: judged(out) >= n, f"{count} judged")
            if i < upto:
                land(files[i], folder / "landing", i)

    half = len(files) // 2
    if client == "connect":
        # The query runs on the server: the client is killed while a file lands, the query
        # going on without it, and started again on its checkpoint (classic: the chaos test).
        with _watching(cluster, folder, day_landed.entities, client, killed=True) as process:
            landed(process, half)
            land(files[half], folder / "landing", half)
            time.sleep(crash.uniform(0.5, 4.0))
    with _watching(cluster, folder, day_landed.entities, client) as process:
        landed(process, len(files), start=half + 1 if client == "connect" else 0)
        resent = _resends(pd.read_parquet(out))
        wanted = len(resent)
        wait_until(
            process, errors, lambda n=wanted: len(_alerted(alerts, "resend")) >= n,
            f"{wanted} resends alerted",
        )  # fmt: skip
    # Classic: one application, whose executor had Spark's default heap; Connect: the
    # server's own application.
    runs = {app: heap for app, heap in _applications().items() if app not in before}
    assert list(runs.values()) == (["1024M"] if client == "classic" else []), runs

    got = pd.read_parquet(out)
    assert got["event_id"].is_unique, "a send was judged twice"
    is_late = got["verdict"] == "late"
    assert set(got.loc[is_late, "event_id"]) == day_landed.late
    missed = got.loc[is_late, "missed_watermark"].astype("datetime64[us]").astype("int64")
    times = got.loc[is_late, "send_time"].astype("datetime64[us]").astype("int64")
    assert (times <= missed).all()

    on_time = got[~is_late][list(VERDICT_COLUMNS)].copy()
    on_time["original_send_time"] = pd.to_datetime(on_time["original_send_time"], utc=True)
    on_time = on_time.sort_values("event_id").reset_index(drop=True)
    want = day_landed.verdicts
    micros = pd.concat(day_landed.files)[["event_id", "send_time"]].set_index("event_id")
    due = micros["send_time"].astype("int64") <= day_landed.final
    due_ids = set(micros.index[due]) - day_landed.late
    assert due_ids <= set(on_time["event_id"]), "on-time sends never judged"
    right = want[want["event_id"].isin(on_time["event_id"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(on_time, right, check_dtype=False)
    assert (on_time["verdict"] == "duplicate").sum() > 50
    # every resend alerted once, with the copy before it; every rejected send once
    raised = _alerted(alerts, "resend")
    assert {str(a["event_id"]): str(a["original_event_id"]) for a in raised} == resent
    assert len(raised) == len(resent) > 10
    rejected = set(got.loc[got["verdict"] == "rejected", "event_id"])
    assert sorted(str(a["event_id"]) for a in _alerted(alerts, "rejected")) == sorted(
        map(str, rejected)
    )
