"""Telemetry in and out: the canonical schema, the readers, the writer, the shipped samples."""
