"""telemetry.renaming: a required column missing names what was found and, where a CSV's
header read as one column holding another separator, that separator."""

from __future__ import annotations

import pytest

from dedup_lib.errors import InputError
from dedup_lib.telemetry.renaming import _resolve_mapping


@pytest.mark.parametrize(
    ("header", "named"),
    [("message_id;send_time", "semicolons"), ("message_id\tsend_time", "tabs"), ("a|b", "'|'")],
)
def test_a_header_of_one_column_holding_another_separator_names_it(header, named):
    with pytest.raises(InputError) as info:
        _resolve_mapping([header], {}, "s.csv")
    assert f"(one column, holding {named}: the file looks separated by {named}" in str(info.value)


@pytest.mark.parametrize("columns", [["Id;x", "send_time"], ["Id"]])
def test_other_headers_get_no_separator_hint(columns):
    with pytest.raises(InputError) as info:
        _resolve_mapping(columns, {}, "s.csv")
    assert "no message_id column" in str(info.value)
    assert "looks separated by" not in str(info.value)
