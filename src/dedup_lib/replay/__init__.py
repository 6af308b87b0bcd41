"""The replay on Spark: the rules in Spark SQL, then one pass per key in a JVM or Python kernel.

- :mod:`~dedup_lib.replay.engine`: ``detect_duplicates``, Service Bus duplicate detection
  replayed exactly.
- :mod:`~dedup_lib.replay.sql_rules`: the rules decided in Spark SQL before any pass: the
  input's checks, the rejections, the sends without MessageId, the keys.
- :mod:`~dedup_lib.replay.passes`: what every pass shares: the sends prepared for it, a Python
  kernel as a Spark function, the result columns.
- :mod:`~dedup_lib.replay.kernels`: what walks each key's sends after the sort.
- :mod:`~dedup_lib.replay.walk`: the anchor walk, written once in Python, which the sweep, the
  live judge and the Python kernel call.
- :mod:`~dedup_lib.replay.by_count`: ``detect_duplicates_by_count``, the ActiveMQ Artemis
  what-if (a history of the last N ids).
"""
