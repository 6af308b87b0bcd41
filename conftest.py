"""Before anything in a test run starts (the tests' Spark sessions, the notebooks' kernels, the
servers and the command lines they run): folders of the run's own.

The compiled replay kernel, the JVM's class-data archive and Spark's log go to
``build/test-cache/``, never to the user's ``~/.cache/dedup_lib`` (or a ``DEDUP_LIB_CACHE`` or
``DEDUP_LOG_DIR`` of theirs), where a notebook or command of theirs may be writing at the same
time. Spark reads the run's own ``spark-defaults.conf``, not the user's: as the properties file
of every JVM that PySpark launches (``PYSPARK_SUBMIT_ARGS``), with ``SPARK_CONF_DIR`` an empty
folder. Spark puts that folder on the JVM's class path, and the JDK writes no class-data
archive for a class path with a non-empty folder on it ("non-empty directory"): every JVM of
the run would start cold, some 13 s more each. The kernels' IPython
history and the Jupyter connection files stay there too, out of ``~/.ipython`` and
``~/.local/share/jupyter``. So does Python's bytecode (``PYTHONPYCACHEPREFIX``), written
even where the environment says ``PYTHONDONTWRITEBYTECODE``: the run starts Python processes
by the dozen (the workers, command lines, kernels, servers, Spark's Python workers), and each
would compile every module it imports from source again (a command line's imports: 3 s of
CPU instead of 0.8 s); and numba's compiled loops (``NUMBA_CACHE_DIR``). So do the JVMs'
scratch files (``SPARK_LOCAL_DIRS`` and ``java.io.tmpdir``): the block managers' folders, the
state stores' working copies, Connect's artifacts, the native libraries lz4 and snappy unpack,
which a JVM removes when it exits and never when a test kills it (the chaos tests, the
command lines' SIGKILL tests): hundreds of MB a run, left in ``/tmp``. Set in the
environment at import, so every process the run starts inherits it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

#: The test run's own cache and log folder.
TEST_CACHE = ROOT / "build" / "test-cache"

#: Spark's defaults for the run's JVMs (the file says which, and why).
SPARK_DEFAULTS = ROOT / "tests" / "spark-conf" / "spark-defaults.conf"

#: ``SPARK_CONF_DIR``: empty, so no user's configuration is read and the class path stays
#: archivable.
SPARK_CONF = TEST_CACHE / "spark-conf"

os.environ["DEDUP_LIB_CACHE"] = str(TEST_CACHE)
SPARK_CONF.mkdir(parents=True, exist_ok=True)
os.environ["SPARK_CONF_DIR"] = str(SPARK_CONF)
os.environ["PYSPARK_SUBMIT_ARGS"] = shlex.join(
    ["--properties-file", str(SPARK_DEFAULTS), "pyspark-shell"]
)
os.environ.pop("DEDUP_LOG_DIR", None)
# The kernels' IPython history database and the Jupyter servers' and kernels' connection files.
os.environ["IPYTHONDIR"] = str(TEST_CACHE / "ipython")
os.environ["JUPYTER_RUNTIME_DIR"] = str(TEST_CACHE / "jupyter-runtime")
# Bytecode compiled once for the run, out of the checkout and the venv; this process's own
# imports from here on (the test modules) included.
os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = str(TEST_CACHE / "pycache")
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# numba's compiled loops (the walk's, the index's) too, not beside the checkout's sources.
os.environ["NUMBA_CACHE_DIR"] = str(TEST_CACHE / "numba")
# The JVMs' scratch: Spark reads SPARK_LOCAL_DIRS before spark.local.dir (a standalone worker
# hands its own to its executors), and every JVM started by spark-submit (the tests' sessions,
# the command lines', the Connect servers) takes SPARK_SUBMIT_OPTS; the cluster's daemons are
# pointed there by tests/cluster_kit.py.
# A folder per run, made by the run's first process (xdist's workers inherit it) and removed
# when that process ends, so runs side by side never clear each other's.
_MAKES_SCRATCH = "DEDUP_TEST_JVM_SCRATCH" not in os.environ
if _MAKES_SCRATCH:
    TEST_CACHE.mkdir(parents=True, exist_ok=True)
    os.environ["DEDUP_TEST_JVM_SCRATCH"] = tempfile.mkdtemp(prefix="jvm-scratch-", dir=TEST_CACHE)
JVM_SCRATCH = Path(os.environ["DEDUP_TEST_JVM_SCRATCH"])
os.environ["SPARK_LOCAL_DIRS"] = str(JVM_SCRATCH)
os.environ["SPARK_SUBMIT_OPTS"] = f"-Djava.io.tmpdir={JVM_SCRATCH}"


def remove_jvm_scratch() -> None:
    """Remove the run's JVM scratch if this process made it (not an xdist worker, nor a child
    of the run's)."""
    if _MAKES_SCRATCH:
        shutil.rmtree(JVM_SCRATCH, ignore_errors=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's JVM scratch goes with the run."""
    remove_jvm_scratch()
