"""The live monitor as a service is seen running.

- :mod:`~dedup_lib.live.service.metrics`: counters and gauges for Prometheus.
- :mod:`~dedup_lib.live.service.exposition`: ``/metrics``, ``/-/healthy`` and ``/-/ready``.
- :mod:`~dedup_lib.live.service.pulse`: health, readiness and the watchdog's pings.
- :mod:`~dedup_lib.live.service.notify`: systemd's notify protocol.
- :mod:`~dedup_lib.live.service.loop`: the micro-batch loop's thread, and what it keeps.
- :mod:`~dedup_lib.live.service.first_file`: started where nothing has landed, the wait for
  the first file.
"""
