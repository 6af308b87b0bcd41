"""The live monitor's state and its judge.

- :mod:`~dedup_lib.live.state.store`: the keys held, each with its anchor, in segments.
- :mod:`~dedup_lib.live.state.index`: the index in memory from keys to anchors.
- :mod:`~dedup_lib.live.state.loops`: the index's loops, compiled by numba and cached on disk.
- :mod:`~dedup_lib.live.state.budget`: the memory the state may take, and a micro-batch
  refused past it.
- :mod:`~dedup_lib.live.state.judge`: a micro-batch judged once the watermark passes it.
- :mod:`~dedup_lib.live.state.resends`: resends that reached consumers again.
- :mod:`~dedup_lib.live.state.alerts`: the alerts a micro-batch's verdicts raise.
"""
