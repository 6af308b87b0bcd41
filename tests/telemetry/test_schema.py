"""telemetry.schema: the canonical columns, the required ones among them, and the names each
is known by in the formats the loader reads."""

from __future__ import annotations

from dedup_lib.telemetry.schema import BUILTIN_ALIASES, CANONICAL_COLUMNS, REQUIRED_COLUMNS


def test_public_constants() -> None:
    assert set(REQUIRED_COLUMNS) <= set(CANONICAL_COLUMNS)
    assert set(BUILTIN_ALIASES) == set(CANONICAL_COLUMNS)
    assert "EnqueuedTimeUtc" in BUILTIN_ALIASES["send_time"]
