"""frame_of: Arrow tables into pandas with texts left in Arrow's buffers, as Spark's toPandas
would give them otherwise (texts_of), without Spark."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from dedup_lib.sweep import frames
from dedup_lib.sweep.frames import TEXT, frame_of, texts_of

TABLE = {
    "entity": pa.array(["orders", None, "<b>x</b>", ""], pa.string()),
    "key": pa.array(["k-1", "k-1", "é\u202e", None], pa.large_string()),
    "time_us": pa.array([1, 2, 3, 4], pa.int64()),
    "logical_id": pa.array([7, None, 9, 9], pa.int64()),
}


def test_texts_stay_in_arrow_and_numbers_become_numpy():
    frame = frame_of(pa.table(TABLE))
    numbers = {"time_us": np.dtype("int64"), "logical_id": np.dtype("float64")}
    assert frame.dtypes.to_dict() == {"entity": TEXT, "key": TEXT, **numbers}
    assert frame["entity"].dtype.storage == "pyarrow"
    assert frame["entity"].isna().tolist() == [False, True, False, False]
    assert frame["key"].tolist()[:3] == ["k-1", "k-1", "é\u202e"]
    assert pd.isna(frame["key"].iloc[3])
    assert (frame["entity"] == "orders").dtype == bool


def test_a_frame_spark_made_gets_the_same_columns():
    table = pa.table(TABLE)
    made = texts_of(table.to_pandas(), ["entity", "key"])
    pd.testing.assert_frame_equal(frame_of(table), made)


def test_an_empty_table_keeps_its_types():
    frame = frame_of(pa.table(TABLE).slice(0, 0))
    assert len(frame) == 0
    assert frame["entity"].dtype == TEXT


def arrived_as_from_spark(table: pa.Table) -> tuple[pa.Table, int]:
    """``table`` as Spark's Arrow stream gives it (its batches slices of what was read), and
    the stream's size."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        for batch in table.to_batches(max_chunksize=10_000):
            stream.write_batch(batch)
    buffer = sink.getvalue()
    return pa.ipc.open_stream(buffer).read_all(), buffer.size


def test_texts_do_not_hold_the_batches_they_came_in():
    rows = 200_000
    numbers = {f"n{i}": np.arange(rows) for i in range(6)}
    arrived, size = arrived_as_from_spark(
        pa.table({"key": [f"key-{i}" for i in range(rows)], **numbers})
    )
    held = pa.total_allocated_bytes()
    frame = frame_of(arrived)
    del arrived
    # What Arrow holds after: the numbers converted (6 columns of 8 bytes a row) and the texts
    # in a buffer of their own; the stream let go, where a text column kept as it came holds
    # all of it.
    converted = sum(frame[c].to_numpy().nbytes for c in numbers) + frame["key"].array.nbytes
    assert pa.total_allocated_bytes() - held <= converted - size + 1_000_000
    assert frame["key"].iloc[-1] == f"key-{rows - 1}"


def batch_by_batch(table: pa.Table, pool: pa.MemoryPool) -> list[pa.Table]:
    """``table`` as Spark's collection hands it over, each batch read from a buffer of its own
    (taken from ``pool``), in a list from which the only reference can be popped."""
    batches = []
    for batch in table.to_batches(max_chunksize=10_000):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as stream:
            stream.write_batch(batch)
        written = sink.getvalue()
        own = pa.allocate_buffer(written.size, memory_pool=pool)
        np.frombuffer(own, dtype=np.uint8)[:] = np.frombuffer(written, dtype=np.uint8)
        batches.append(pa.ipc.open_stream(own).read_next_batch())
    return [pa.Table.from_batches(batches)]


def test_the_table_is_let_go_a_group_at_a_time(monkeypatch):
    pool = pa.proxy_memory_pool(pa.system_memory_pool())
    monkeypatch.setattr(frames, "_POOL", pool)
    monkeypatch.setattr(frames, "GROUP_BYTES", 1 << 20)
    rows = 300_000
    table = pa.table({"key": [f"order-{i:024d}" for i in range(rows)], "time_us": np.arange(rows)})
    arrived = batch_by_batch(table, pool)
    size = pool.bytes_allocated()
    frame = frame_of(arrived.pop())
    # The batches and their copies never all held at once: at most one group more (its
    # batches and their copy), where a conversion of the whole table holds it twice.
    assert pool.max_memory() <= size + 3 * frames.GROUP_BYTES
    assert size > 10 * frames.GROUP_BYTES
    pd.testing.assert_frame_equal(frame, frame_of(table))
