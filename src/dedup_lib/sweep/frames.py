"""Arrow tables into pandas without Python objects: what the cache's rows are held as.

Spark hands the driver Arrow batches. Numbers are copied into numpy arrays; texts (entity,
key, ids, causes) stay Arrow, as pandas' ``str`` columns, where ``object`` columns made one
Python string per distinct value and a pointer per row, hashed by Python in every grouping.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

#: pandas' text type kept in Arrow's buffers (pandas 3's default ``str``; missing is NaN, as
#: in ``object`` columns): a column of ids costs its bytes, and is hashed and compared in Arrow.
TEXT = pd.StringDtype("pyarrow", na_value=np.nan)

_TEXTS = {pa.string(): TEXT, pa.large_string(): TEXT}


def frame_of(table: pa.Table) -> pd.DataFrame:
    """``table`` in pandas: numbers in numpy arrays, texts as :data:`TEXT`, each text column
    copied into buffers of its own. Spark's Arrow batches arrive each in one buffer, every
    column a slice of it: a text column kept as it came kept every column of its batches
    alive (a 4 M-row table of a text and five numbers: 418 MB held after conversion, 283 MB
    with the texts copied, 445 MB with a Python string per row). Until the table is let go,
    its batches and the converted columns are both held."""
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            texts = table.column(i).cast(pa.large_string()).combine_chunks()
            table = table.set_column(i, field.name, pa.chunked_array([texts]))
    frame: pd.DataFrame = table.to_pandas(
        split_blocks=True, self_destruct=True, types_mapper=_TEXTS.get
    )
    return frame


def texts_of(frame: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """``frame`` with the columns ``names`` as :data:`TEXT`, as :func:`frame_of` gives them
    (for a frame that Spark's ``toPandas`` made)."""
    return frame.astype(dict.fromkeys(names, TEXT))
