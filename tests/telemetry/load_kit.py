"""Checks every loaded input must pass, shared by the tests of each format."""

from __future__ import annotations

import dataclasses

import pandas as pd

from dedup_lib.telemetry.loaded import LoadedTelemetry


def checked_counts(loaded: LoadedTelemetry) -> dict[str, int]:
    """The load's counts, checked to add up."""
    counts = loaded.counts()
    assert counts["read"] == counts["valid"] + counts["quarantined"] + counts["skipped"]
    return counts


def assert_reasons_counted_alike(loaded: LoadedTelemetry) -> None:
    """The reasons the load counted are what the quarantine and the records skipped hold."""
    from_frames = dataclasses.replace(loaded, reasons=None)
    assert loaded.reasons is not None
    pd.testing.assert_frame_equal(loaded.quarantine_reasons(), from_frames.quarantine_reasons())
    pd.testing.assert_frame_equal(loaded.not_send_reasons(), from_frames.not_send_reasons())
