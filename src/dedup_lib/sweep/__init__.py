"""Any window's verdicts from one Spark pass: the explorer's and the sweep's engine.

From Spark, once: :mod:`~dedup_lib.sweep.collect` brings what the cache needs into a few
arrays, by the driver's road (:mod:`~dedup_lib.sweep.driver_road`, an input small enough) or
Spark's (:mod:`~dedup_lib.sweep.spark_road`), both ending in the tables of
:mod:`~dedup_lib.sweep.collected` (with what they share: the mode's rules, every send as one
narrow row); :mod:`~dedup_lib.sweep.counts` counts every send,
:mod:`~dedup_lib.sweep.frames` holds the rows as pandas without Python objects, and
:mod:`~dedup_lib.sweep.footprint` says how much of the driver's memory the cache would take
before anything is brought to it.

In memory, for any window: :mod:`~dedup_lib.sweep.cache` (:class:`ReplayCache`), its rows
numbered by :mod:`~dedup_lib.sweep.codes` and its sends per entity and time bucket laid out by
:mod:`~dedup_lib.sweep.cells`; :mod:`~dedup_lib.sweep.anchors` (the window rule, in numpy),
:mod:`~dedup_lib.sweep.views` (the tables it answers), :mod:`~dedup_lib.sweep.truth` (ground
truth: what a window does to messages) and :mod:`~dedup_lib.sweep.grid` (which windows to
sweep).
"""
