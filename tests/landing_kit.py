"""Two hours of the day sample landed as a stream of files, as the live monitor's exactness
tests land it (``tests/live/test_watch.py``, ``tests/cluster/test_watch_cluster.py``): most
sends in the file of their time, some delayed within the lateness into later files, some
hours late. Which sends land behind the watermark is computed here from the files,
independently of Spark: the watermark a file meets is the latest send time (milliseconds) of
the files before it, minus the lateness."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: How late a send may land and still be judged.
LATENESS = pd.Timedelta(minutes=2)
#: Files in landing order: most sends land in the first two, the hours-late ones in the third
#: (a fourth, of 33 more hours-late sends, added a once-run and no path).
FILES = 3


def first_hours(sends: pd.DataFrame, hours: int = 2) -> pd.DataFrame:
    """The sends of the first ``hours`` of ``sends`` (typed send times), by event id."""
    start = sends["send_time"].min()
    frame = sends[sends["send_time"] < start + pd.Timedelta(hours=hours)]
    return frame.sort_values("event_id").reset_index(drop=True)


def arrivals(sends: pd.DataFrame, seed: int = 7) -> pd.Series:
    """Each send's file: by the time it lands. A send call's messages land together."""
    rng = np.random.default_rng(seed)
    call = sends["batch_id"].where(sends["batch_id"].notna(), sends["event_id"].astype(str))
    calls = pd.Series(pd.factorize(sends["entity"].astype(str) + "\x00" + call)[0])
    count = int(calls.max()) + 1
    draw = rng.random(count)
    delay = np.where(draw < 0.85, 0.0, rng.uniform(0, 0.9 * LATENESS.total_seconds(), count))
    delay = np.where(draw > 0.99, 3 * 3600.0, delay)
    landed = sends["send_time"] + pd.to_timedelta(delay[calls.to_numpy()], unit="s")
    edges = pd.date_range(sends["send_time"].min(), landed.max(), periods=FILES + 1)
    return pd.Series(np.searchsorted(edges[1:-1], landed, side="right"), index=sends.index)


def expected_late(sends: pd.DataFrame, file_of: pd.Series) -> tuple[set[int], int]:
    """The event ids that land behind the watermark, and the final watermark (micros)."""
    micros = sends["send_time"].astype("datetime64[us]").astype("int64")
    late: set[int] = set()
    latest_ms: int | None = None
    lateness_ms = int(LATENESS.total_seconds() * 1000)
    for i in range(FILES):
        here = file_of == i
        if latest_ms is not None:
            watermark = (latest_ms - lateness_ms) * 1000
            late |= set(sends.loc[here & (micros <= watermark), "event_id"].tolist())
        if here.any():
            top = int(micros[here].max()) // 1000
            latest_ms = top if latest_ms is None else max(latest_ms, top)
    assert latest_ms is not None
    return late, (latest_ms - lateness_ms) * 1000


def land(sends: pd.DataFrame, folder: Path, i: int, unit: str = "us") -> None:
    """Write a file as a sender's pipeline would: under a hidden name, then renamed. Every
    file has the same types (a column of nulls in one file is still text). ``unit`` "ns":
    times as pandas writes them by default, which Spark reads only as epoch nanoseconds."""
    schema = pa.Schema.from_pandas(sends, preserve_index=False)
    fields = [f.with_type(pa.string()) if pa.types.is_null(f.type) else f for f in schema]
    fields = [
        f.with_type(pa.timestamp(unit, f.type.tz)) if pa.types.is_timestamp(f.type) else f
        for f in fields
    ]
    table = pa.Table.from_pandas(sends, schema=pa.schema(fields), preserve_index=False)
    pq.write_table(table, folder / f".landing-{i}", coerce_timestamps=None)
    (folder / f".landing-{i}").rename(folder / f"sends-{i:02d}.parquet")


def day_sends(path: Path) -> pd.DataFrame:
    """The sends of the day sample at ``path`` whose send time parses (ISO 8601; the rest the
    loader quarantines), their times typed as Spark holds them (naive UTC), by event id,
    read by pandas: for a test whose process holds no Spark session."""
    frame = pd.read_parquet(path)
    times = pd.to_datetime(frame["send_time"], errors="coerce", utc=True, format="ISO8601")
    frame = frame.assign(send_time=times.dt.tz_localize(None).astype("datetime64[us]"))
    return frame[frame["send_time"].notna()].reset_index(drop=True)
