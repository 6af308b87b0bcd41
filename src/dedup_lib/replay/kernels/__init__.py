"""What walks each key's sends after the sort: a Java function (the default) or Arrow in Python.

- :mod:`~dedup_lib.replay.kernels.jvm`: ``java/Replay.java``, compiled on first use and
  registered as a Spark function per session.
- :mod:`~dedup_lib.replay.kernels.python`: one pass over the sorted sends, in Arrow batches.
"""

from __future__ import annotations

from typing import Literal, get_args

#: Which replay kernel runs the pass; see :func:`dedup_lib.detect_duplicates`.
Kernel = Literal["auto", "jvm", "python"]
KERNELS: tuple[str, ...] = get_args(Kernel)
