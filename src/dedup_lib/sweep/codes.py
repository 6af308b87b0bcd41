"""The repeated rows of a :class:`~dedup_lib.sweep.cache.ReplayCache` numbered, and the
counts no window changes: computed once per cache."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dedup_lib.analysis.totals import NO_ENTITY
from dedup_lib.sweep.cells import Cells
from dedup_lib.sweep.counts import entity_codes


@dataclass(frozen=True)
class Codes:
    """The repeated rows numbered, and the counts no window changes.

    ``names``: entity names, sorted (``(none)`` for sends without one), numbered by their
    place. Per repeated row: ``entity`` (code). ``cells``: sends per entity and time bucket.
    Per key: ``key_sends``, ``key_entity``, ``keys``. Per entity code: ``sends`` in repeated
    keys, and ``single``, ``without_message_id`` and ``rejected`` sends outside them."""

    names: list[str]
    entity: np.ndarray
    cells: Cells
    key_sends: np.ndarray
    key_entity: np.ndarray
    keys: np.ndarray
    sends: np.ndarray
    single: np.ndarray
    without_message_id: np.ndarray
    rejected: np.ndarray


def number_rows(
    repeated: pd.DataFrame,
    fixed: pd.DataFrame,
    time: np.ndarray,
    key_number: np.ndarray,
    first_row: np.ndarray,
    bucket: int,
) -> Codes:
    """Entity and time-bucket numbering of the repeated rows (at ``time``, keys numbered by
    ``key_number`` from ``first_row``), and the window-independent counts of ``fixed``."""
    found, distinct = entity_codes(repeated["entity"])
    fixed = fixed.assign(entity=fixed["entity"].fillna(NO_ENTITY))
    names = sorted(set(distinct) | set(fixed["entity"]))
    index = {name: i for i, name in enumerate(names)}
    entity = np.array([index[e] for e in distinct], dtype=np.int64)[found]
    starts = (time // bucket) * bucket
    timed = fixed.dropna(subset=["bucket_us"])
    lows = [int(starts.min())] if len(starts) else []
    if len(timed):
        lows.append(int(timed["bucket_us"].min()))
    low = min(lows) if lows else 0
    key_sends = np.bincount(key_number) if len(key_number) else np.zeros(0)
    fixed_entity = np.array([index[e] for e in fixed["entity"]], dtype=np.int64)

    def fixed_sends(kind: str) -> np.ndarray:
        mine = (fixed["kind"] == kind).to_numpy()
        counts = fixed["sends"].to_numpy()[mine]
        return np.bincount(fixed_entity[mine], weights=counts, minlength=len(names))

    return Codes(
        names=names,
        entity=entity,
        cells=Cells.of(names, low, bucket, entity, (starts - low) // bucket, fixed, fixed_entity),
        key_sends=key_sends,
        key_entity=entity[first_row] if len(first_row) else entity[:0],
        keys=repeated["key"].iloc[first_row].to_numpy(dtype=object),
        sends=np.bincount(entity, minlength=len(names)),
        single=fixed_sends("single").astype("int64"),
        without_message_id=fixed_sends("without_message_id").astype("int64"),
        rejected=fixed_sends("rejected").astype("int64"),
    )


def distinct_per_key(key_number: np.ndarray, values: pd.Series) -> np.ndarray:
    """How many distinct ``values`` each key (numbered 0, 1, 2, ... down the rows) holds: pairs
    numbered and hashed, not sorted."""
    if len(key_number) == 0:
        return np.zeros(0, dtype=np.int64)
    codes, distinct = pd.factorize(values, use_na_sentinel=False)
    pairs = pd.unique(key_number * max(len(distinct), 1) + codes)
    return np.bincount(pairs // max(len(distinct), 1), minlength=int(key_number[-1]) + 1)


def most(score: np.ndarray, n: int) -> np.ndarray:
    """The positions of the ``n`` highest ``score``, and of those tied with the last of them
    up to ``n`` more (first in the rows' order): enough to order the ties by name, never
    every key (a window that drops nothing ties them all)."""
    count = min(n, len(score))
    if count == 0:
        return np.arange(0)
    threshold = np.partition(score, -count)[-count]
    above = np.flatnonzero(score > threshold)
    return np.concatenate([above, np.flatnonzero(score == threshold)[:n]])
