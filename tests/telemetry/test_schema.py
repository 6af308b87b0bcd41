"""telemetry.schema: the canonical columns, the required ones among them, and the names each
is known by in the formats the loader reads."""

from __future__ import annotations

import shlex

from dedup_lib.cli.options import column_mapping
from dedup_lib.telemetry.schema import (
    BUILTIN_ALIASES,
    CANONICAL_COLUMNS,
    REQUIRED_COLUMNS,
    format_hint,
    mapping_hint,
)


def test_public_constants() -> None:
    assert set(REQUIRED_COLUMNS) <= set(CANONICAL_COLUMNS)
    assert set(BUILTIN_ALIASES) == set(CANONICAL_COLUMNS)
    assert "EnqueuedTimeUtc" in BUILTIN_ALIASES["send_time"]


def test_a_mapping_hint_reads_back_as_the_loader_and_the_command_line_read_it() -> None:
    pairs = {"<your column>": "message_id", "x=y it's": "message_id_original"}
    hint = mapping_hint(pairs)
    python, _, flags = hint.partition(" (")
    assert python == f"mapping={pairs!r}"
    words = shlex.split(flags.removesuffix(" on the command line)"))
    assert words[::2] == ["--map", "--map"]
    assert column_mapping(words[1::2]) == pairs


def test_a_format_hint_names_the_loader_s_argument_and_the_command_line_s_option() -> None:
    assert format_hint(("parquet", "csv", "json")) == (
        "format='parquet', 'csv' or 'json' (--format parquet, csv or json on the command line)"
    )
    assert format_hint(["otlp"]) == "format='otlp' (--format otlp on the command line)"
