"""live.state.loops: the index's loops compiled by numba in the background as a monitor starts,
and loaded from numba's cache on disk by a process started again (their results are the
index's, tested there). No Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: A process that starts the background compile, waits for it, and prints each loop's
#: signatures and the ones loaded from numba's cache.
COMPILED = """
import json
from dedup_lib.live.state import index, loops
index.compile_in_background().join()
print(json.dumps({f.__name__: [len(f.signatures), sum(f.stats.cache_hits.values())]
                  for f in (loops.find, loops.put, loops.drop)}))
"""


def test_the_loops_are_compiled_in_the_background_and_loaded_by_the_next_process(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-c", COMPILED]
    printed = []
    for _ in range(2):
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        printed.append(json.loads(run.stdout))
    first, second = printed
    # Compiled, not only made ready to compile: one signature each, none from the cache.
    assert first == {"find": [1, 0], "put": [1, 0], "drop": [1, 0]}
    # A process started again loads each from numba's cache on disk.
    assert second == {"find": [1, 1], "put": [1, 1], "drop": [1, 1]}
