"""The Python kernel's id-count caches, without Spark: several capacities in one pass each
judge as a pass of their own would."""

from __future__ import annotations

from collections import deque

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from dedup_lib.replay.kernels.python import count_caches

CAPACITIES = (1, 2, 5)


def _model(sends: list[tuple[str, str, bool]], capacity: int) -> list[int | None]:
    """The row each send duplicates (its original's time), or None: last N ids per entity."""
    held: dict[str, deque[str]] = {}
    times: dict[tuple[str, str], int] = {}
    out: list[int | None] = []
    for t, (entity, key, decided) in enumerate(sends):
        cache = held.setdefault(entity, deque())
        if decided:
            out.append(None)
        elif key in cache:
            out.append(times[entity, key])
        else:
            out.append(None)
            cache.append(key)
            times[entity, key] = t
            if len(cache) > capacity:
                cache.popleft()
    return out


@given(
    st.lists(
        st.tuples(st.sampled_from("ab"), st.sampled_from("vwxyz"), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 7),
)
def test_each_capacity_judges_as_it_would_alone(sends, batch):
    sends.sort(key=lambda s: s[0])  # the engine passes them sorted by entity, then time
    entities = pa.array([s[0] for s in sends], pa.string())
    keys = pa.array([s[1] for s in sends], pa.string())
    times = pa.array(range(len(sends)), pa.timestamp("us"))
    ids = pa.array(range(len(sends)), pa.int64())
    decided = pa.array([s[2] for s in sends], pa.bool_())
    batches = [
        tuple(a.slice(i, batch) for a in (keys, entities, times, ids, decided))
        for i in range(0, len(sends), batch)
    ]
    answers = pa.concat_arrays(list(count_caches(iter(batches), CAPACITIES, True)))
    for i, capacity in enumerate(CAPACITIES):
        found = answers.field(f"c{i}").field("original_event_id").to_pylist()
        assert found == _model(sends, capacity), capacity
