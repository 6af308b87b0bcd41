from __future__ import annotations

import pandas as pd
import pytest

from dedup_lib.analysis.selection import narrow


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "entity": ["orders", "audit", "orders", "orders"],
            "time": pd.to_datetime(
                ["2026-11-03T20:59", "2026-11-03T21:00", "2026-11-03T21:30", "2026-11-03T22:01"],
                utc=True,
            ),
        }
    )


def test_a_pandas_table_is_cut_by_entity_and_closed_time_range(table):
    cut = narrow(table, "orders", "2026-11-03T21:00", "2026-11-03T22:00", time="time")
    assert list(cut.index) == [2]


def test_all_entities_and_open_ends_keep_everything(table):
    assert narrow(table, "(all)", time="time").equals(table)
    assert list(narrow(table, None, start="2026-11-03T21:00Z", time="time").index) == [1, 2, 3]


def test_an_offset_is_honoured_and_no_offset_means_utc(table):
    later = narrow(table, end="2026-11-03T23:00+02:00", time="time")
    assert list(later.index) == [0, 1]


def test_an_entity_on_data_without_entities_is_refused():
    with pytest.raises(ValueError, match="no entity column"):
        narrow(pd.DataFrame({"time": []}), "orders", time="time")


def test_an_unreadable_time_names_the_bound():
    with pytest.raises(ValueError, match=r"start: cannot read 'yesterday'"):
        narrow(pd.DataFrame({"time": []}), start="yesterday", time="time")
