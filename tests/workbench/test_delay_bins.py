"""DelayBins: the resend delays laid out once give the histogram of any part exactly as
``numpy.histogram`` of that part of the table does, causes, empty causes and all."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dedup_lib.analysis.selection import narrow
from dedup_lib.workbench import charts
from dedup_lib.workbench.delay_bins import SHORTEST, DelayBins

START = pd.Timestamp("2026-11-02", tz="UTC")


def _delays(rows: int = 2_000, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    causes = np.array(["replay", "ack_lost_retry", None, "<b>odd</b>"], dtype=object)
    return pd.DataFrame(
        {
            "entity": rng.choice(["orders", "payments", "(none)"], rows),
            "time": START + pd.to_timedelta(rng.integers(0, 86_400, rows), unit="s"),
            "delay_s": np.where(rng.random(rows) < 0.05, 0.0, rng.lognormal(3, 3, rows)),
            "cause": causes[rng.integers(0, len(causes), rows)],
        }
    )


def _histograms(table: pd.DataFrame, edges: np.ndarray) -> dict[object, list[int]]:
    logs = np.log10(np.maximum(table["delay_s"].to_numpy(dtype="float64"), SHORTEST))
    causes = table["cause"].to_numpy(dtype=object)
    found = {}
    for cause in pd.unique(causes):
        mine = np.array([c is cause or c == cause for c in causes])
        found[None if pd.isna(cause) else cause] = np.histogram(logs[mine], bins=edges)[0].tolist()
    return found


PARTS = [
    ("(all)", None, None),
    ("orders", None, None),
    ("(none)", None, None),
    ("(all)", START + pd.Timedelta(hours=3), START + pd.Timedelta(hours=5)),
    ("payments", START + pd.Timedelta(hours=20), None),
    ("nobody", None, None),
]


@pytest.mark.parametrize(("entity", "start", "end"), PARTS)
def test_a_part_counts_as_the_histogram_of_the_narrowed_table(entity, start, end):
    table = _delays()
    bins = DelayBins.of(table).part(entity, start, end)
    cut = narrow(table, entity, start, end, time="time")
    assert len(bins) == len(cut)
    if len(cut):
        shortest = np.maximum(cut["delay_s"], SHORTEST)
        assert bins.span() == (shortest.min(), shortest.max())
    edges = np.linspace(-3.5, 7.0, 61)
    counted = {
        None if pd.isna(cause) else cause: counts.tolist() for cause, counts in bins.counts(edges)
    }
    assert counted == _histograms(cut, edges)


def test_parts_are_kept_and_the_whole_is_itself():
    bins = DelayBins.of(_delays())
    assert bins.part() is bins
    assert bins.part("orders") is bins.part("orders")


def test_a_table_without_causes_is_one_group_even_when_a_part_is_empty():
    bins = DelayBins.of(_delays().drop(columns="cause"))
    assert [name for name, _ in bins.counts(np.linspace(-4, 8, 5))] == ["resends"]
    empty = bins.part("nobody")
    assert len(empty) == 0
    assert [(name, counts.tolist()) for name, counts in empty.counts(np.linspace(0, 1, 3))] == [
        ("resends", [0, 0])
    ]
    assert empty.span() == (1.0, 1.0)


def test_resends_without_a_cause_are_drawn_and_named_in_words():
    table = _delays()
    fig = charts.resend_delays(table, 600.0)
    names = [trace.name for trace in fig.data]
    assert charts.NO_CAUSE in names
    assert "&lt;b&gt;odd&lt;/b&gt;" in names  # data, escaped where it is drawn
    assert sum(int(sum(trace.y)) for trace in fig.data) == len(table)
