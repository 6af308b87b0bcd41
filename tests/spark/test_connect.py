"""spark.connect: a process started by a run that holds a local Spark Connect server still
gets classic Spark when it asks for a local master."""

from __future__ import annotations

import pytest


@pytest.mark.spark  # starts Spark in a child process
def test_a_child_of_a_local_connect_run_still_gets_classic_spark():
    """Kernels started by a test run that holds a local Connect server inherit its variables."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_LOCAL_REMOTE": "1"}
    env.pop("SPARK_REMOTE", None)
    code = (
        "from dedup_lib import get_spark\n"
        "from dedup_lib.spark import is_connect\n"
        "spark = get_spark(master='local[1]', config={'spark.ui.enabled': 'false'})\n"
        "print(is_connect(spark), spark.range(3).count())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "3"]
