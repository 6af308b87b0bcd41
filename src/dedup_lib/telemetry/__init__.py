"""Telemetry in and out: the canonical schema, the readers, the writer, the shipped samples,
and the recorder applications wrap their Service Bus senders with."""
