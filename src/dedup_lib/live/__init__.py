"""The live monitor: the broker's verdicts on sends as they land (docs/rules.md, section 8).

The package is laid out by stage, in the order a micro-batch goes through them; each stage
imports only the stages before it (an import contract in ``pyproject.toml`` says so):

- :mod:`~dedup_lib.live.landing`: where the bytes come from. The ledger decides which bytes
  of which landed file are finished and copies them out as chunks, each read once.
- :mod:`~dedup_lib.live.intake`: the micro-batch's Spark pass. The chunks read, loaded by the
  loader's rules and keyed as the batch replay keys them.
- :mod:`~dedup_lib.live.state`: the state and its judge. The anchors each key holds, the
  sends waiting for the watermark, the verdicts and the alerts they raise.
- :mod:`~dedup_lib.live.output`: what it writes and says. Verdict and alert files, each
  micro-batch's line, the checkpoint's totals, the metrics' entity labels.
- :mod:`~dedup_lib.live.service`: how it is seen running. Prometheus metrics, health and
  readiness over HTTP, systemd's notify protocol.

Beside them: :mod:`~dedup_lib.live.durable` (files written whole or not at all, under every
stage), :mod:`~dedup_lib.live.checkpoint` (the settings, folders, plans and commits a
checkpoint keeps), :mod:`~dedup_lib.live.runner` (a micro-batch through the stages, committed)
and :mod:`~dedup_lib.live.watch` (``watch_duplicates``, its entry point), whose
options are the records of :mod:`~dedup_lib.live.options` (under every stage).
:mod:`~dedup_lib.live.executors` holds the state on the executors instead: Spark's state
store, in one long-running streaming query.
"""
