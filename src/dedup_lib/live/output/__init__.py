"""What the live monitor writes and says.

- :mod:`~dedup_lib.live.output.sink`: the verdicts' and quarantined rows' Parquet files, the
  alerts file.
- :mod:`~dedup_lib.live.output.jsonl`: an Arrow table as JSON Lines.
- :mod:`~dedup_lib.live.output.lines`: each micro-batch's line.
- :mod:`~dedup_lib.live.output.totals`: what the checkpoint's micro-batches counted.
- :mod:`~dedup_lib.live.output.labels`: the metrics' ``entity`` label, bounded.
"""
