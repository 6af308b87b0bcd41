"""The live monitor's Spark pass over one micro-batch.

- :mod:`~dedup_lib.live.intake.micro_batch`: the chunks read, loaded and keyed in one pass,
  brought to the driver as Arrow beside the quarantined rows.
- :mod:`~dedup_lib.live.intake.keyed`: each send keyed as the batch replay keys it.
"""
