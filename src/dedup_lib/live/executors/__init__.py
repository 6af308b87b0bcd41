"""The live monitor's state on the executors: Spark's state store instead of the driver's
index (docs/decisions/live-state-executors.md), in one long-running streaming query, and a
second one beside it for the resends.

- :mod:`~dedup_lib.live.executors.processor`: the judge, a JVM ``transformWithState``
  processor compiled on first use, and the stream's columns.
- :mod:`~dedup_lib.live.executors.connect`: the judge on a Spark Connect server, reached
  through a relation plugin the server starts with.
- :mod:`~dedup_lib.live.executors.staging`: a plan's micro-batch pass written by Spark, read
  back as valid sends and quarantined rows, nothing of them in the driver.
- :mod:`~dedup_lib.live.executors.inbox`: each ledger plan's sends staged as one Parquet file,
  one of Spark's micro-batches.
- :mod:`~dedup_lib.live.executors.query`: the streaming query, its verdicts written once per
  micro-batch, and its figures.
- :mod:`~dedup_lib.live.executors.resends`: the resends' query, pairing each micro-batch's
  accepted copies of contents in a state of its own, keyed by content.
- :mod:`~dedup_lib.live.executors.plans`: the ledger's plans fed to the query, each once.
- :mod:`~dedup_lib.live.executors.counts`: what the loads and the verdicts counted, recorded in
  the checkpoint for the metrics and a restart.
- :mod:`~dedup_lib.live.executors.runner`: ``watch --state executors``'s micro-batches, with
  the driver's runner's face.
"""
