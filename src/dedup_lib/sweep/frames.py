"""Arrow tables into pandas without Python objects: what the cache's rows are stored as.

Spark hands the driver Arrow batches. Numbers are copied into numpy arrays; texts (entity,
key, ids, causes) stay Arrow, as pandas' ``str`` columns, where ``object`` columns made one
Python string per distinct value and a pointer per row, hashed by Python in every grouping.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from dedup_lib.memory import release_freed

#: pandas' text type stored in Arrow's buffers (pandas 3's default ``str``; missing is NaN, as
#: in ``object`` columns): a column of ids costs its bytes, and is hashed and compared in Arrow.
TEXT = pd.StringDtype("pyarrow", na_value=np.nan)

_TEXTS = {pa.string(): TEXT, pa.large_string(): TEXT}

#: Batches are copied this many bytes at a time: what the conversion holds beside the table.
GROUP_BYTES = 64 << 20

#: Where the copies are made: the C allocator, that Spark's batches came from (Python reads
#: them from a socket), rather than Arrow's own, that keeps what it frees.
_POOL = pa.system_memory_pool()


def frame_of(table: pa.Table) -> pd.DataFrame:
    """``table`` in pandas: numbers in numpy arrays, texts as :data:`TEXT`.

    Spark's Arrow batches arrive each in one buffer, every column a slice of it: a column
    left as it came keeps its whole batch alive. So the batches are copied a group of
    :data:`GROUP_BYTES` at a time, each column into buffers of its own, and each group's
    batches let go once copied; pandas then takes the numbers column by column, letting each
    go as it goes. The memory of each group is handed back to the system as it is let go
    (:func:`~dedup_lib.memory.release_freed`): the copies, larger than a batch, do not reuse
    it. Given the only reference to ``table`` (``frame_of(df.toArrow())``), the driver holds
    the table and one group beside it, where converting it whole holds the table and its
    copy."""
    fields = [f.with_type(pa.large_string()) if f.type in _TEXTS else f for f in table.schema]
    schema = pa.schema(fields, metadata=table.schema.metadata)
    batches = table.to_batches()[::-1]
    del table
    groups = []
    while batches:
        group = [batches.pop()]
        size = group[0].nbytes
        while batches and size < GROUP_BYTES:
            group.append(batches.pop())
            size += group[-1].nbytes
        groups.append(_copied(group, schema))
        del group
        release_freed()
    copied = pa.Table.from_batches(groups, schema)
    del groups
    frame: pd.DataFrame = copied.to_pandas(
        split_blocks=True, self_destruct=True, types_mapper=_TEXTS.get
    )
    return frame


def _copied(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    """``batches`` as one batch of ``schema``, every column in buffers of its own."""
    columns = [
        pa.concat_arrays(
            [b.column(i).cast(field.type, memory_pool=_POOL) for b in batches], memory_pool=_POOL
        )
        for i, field in enumerate(schema)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def texts_of(frame: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """``frame`` with the columns ``names`` as :data:`TEXT`, as :func:`frame_of` gives them
    (for a frame that Spark's ``toPandas`` made)."""
    return frame.astype(dict.fromkeys(names, TEXT))
