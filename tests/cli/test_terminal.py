"""cli.terminal: what a command prints on the terminal: a table whose hostile text (terminal
escapes, newlines) is escaped, one line per row."""

from __future__ import annotations

import pandas as pd

from dedup_lib.cli.terminal import text_table

HOSTILE = "\x1b]0;pwned\x07\x1b[2J"


def test_hostile_text_in_a_table_is_escaped():
    table = pd.DataFrame({"entity": [HOSTILE, "orders"], "message_id": ["a\nb", HOSTILE]})
    shown = text_table(table)
    assert "\x1b" not in shown
    assert "\x07" not in shown
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown
    assert len(shown.splitlines()) == 3
