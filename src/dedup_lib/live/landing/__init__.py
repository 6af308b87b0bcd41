"""Where the live monitor's bytes come from: a folder that files land in.

- :mod:`~dedup_lib.live.landing.ledger`: which bytes of which file are taken, so that each
  record is read once, whole, however the file arrived.
- :mod:`~dedup_lib.live.landing.records`: where records end in a file still being written.
- :mod:`~dedup_lib.live.landing.rotation`: the Collector's rotated files, one stream.
- :mod:`~dedup_lib.live.landing.chunks`: the planned bytes copied out as files for Spark.
- :mod:`~dedup_lib.live.landing.feed`: a folder landed file by file, for demos and tests.
"""
