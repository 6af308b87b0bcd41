"""A streaming query's start, tried again when a Spark Connect server gave up waiting for the
Python process of its ``foreachBatch``; the wait for the micro-batch in hand before a stop;
the session of a query's own, closed once it is done.

A Connect server runs a query's ``foreachBatch`` function in a Python process it starts with
the query, and waits a fixed 10 seconds for that process to connect back (Spark's
``PythonWorkerFactory``; no setting changes it). On a loaded server the process's imports
alone can take longer, and the start fails with "Python worker failed to connect back"
although nothing is wrong with the query: no query was started, so starting it again is
safe.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import TYPE_CHECKING, Protocol

from dedup_lib.errors import DedupLibWarning, ToolMissingError
from dedup_lib.spark.connect import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

#: What a Connect server answers when the ``foreachBatch`` process did not connect back.
WORKER_LATE = "Python worker failed to connect back"
#: The starts a query is given before that failure is the caller's.
STARTS = 5
#: The seconds a stop waits at most for the micro-batch in hand to be committed: several
#: micro-batches of a million sends (8 to 11 s each on 2 cores).
IN_HAND_SECONDS = 120.0
#: The seconds between two looks at a query that is stopping.
LOOK_SECONDS = 0.05


class LateWorkerError(ToolMissingError):
    """A Connect server's ``foreachBatch`` process was late at every start of a query."""


class Startable(Protocol):
    """What starts a streaming query: PySpark's ``DataStreamWriter``, classic or Connect."""

    def start(self) -> StreamingQuery:
        """Start the query."""


def start_query(writer: Startable, starts: int = STARTS) -> StreamingQuery:
    """``writer``'s query, started; a start the Connect server failed because the
    ``foreachBatch`` process was late (:data:`WORKER_LATE`) tried again, up to ``starts``
    in all, each retry warned about (a :class:`~dedup_lib.errors.DedupLibWarning`).

    Raises
    ------
    LateWorkerError
        The process was late at every start: what that means and what to do, chained to
        the server's last failure.

    Examples
    --------
    >>> class Late:
    ...     tries = 0
    ...     def start(self):
    ...         self.tries += 1
    ...         if self.tries == 1:
    ...             raise RuntimeError("Python worker failed to connect back.")
    ...         return "started"
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as said:
    ...     warnings.simplefilter("always")
    ...     start_query(Late())
    'started'
    >>> print(said[0].message)
    a streaming query's start, tried again (2 of 5): Python worker failed to connect back.
    """
    for attempt in range(1, starts + 1):
        try:
            return writer.start()
        except Exception as failure:
            if WORKER_LATE not in str(failure):
                raise
            first = str(failure).splitlines()[0]
            if attempt == starts:
                raise LateWorkerError(
                    f"{first.rstrip('.')}, {starts} starts in a row: the Spark Connect server "
                    "gives the Python process of a streaming query's foreachBatch 10 s to "
                    "start, and it took longer (the server overloaded, or its Python slow to "
                    "import pyspark); start again when the server is less busy, or run on "
                    "classic Spark (--master)"
                ) from failure
            warnings.warn(
                f"a streaming query's start, tried again ({attempt + 1} of {starts}): {first}",
                DedupLibWarning,
                stacklevel=2,
            )
    raise ValueError(f"starts: expected 1 or more, not {starts}")


def wait_for_micro_batch(query: StreamingQuery, seconds: float = IN_HAND_SECONDS) -> None:
    """Wait until the micro-batch ``query`` has in hand, if any, is committed (or the query
    stopped), for at most ``seconds``: what a stop waits for.

    Spark's ``stop()`` cancels the jobs of a micro-batch in hand (its ``foreachBatch`` and
    what that runs), which then runs again at the next start: the work done twice, and on
    classic Spark a ``toPandas`` in the ``foreachBatch`` warns with the cancelled job's Java
    stack. Where triggers follow one another without a pause, this returns as the micro-batch
    in hand ends, at worst as the next one starts.

    Examples
    --------
    >>> from dedup_lib import get_spark
    >>> spark = get_spark()
    >>> query = spark.readStream.format("rate").load().writeStream.format("noop").start()
    >>> wait_for_micro_batch(query)
    >>> query.stop()
    >>> query.isActive
    False
    """
    deadline = time.monotonic() + seconds
    before = _last_batch(query)
    while (
        query.isActive
        and query.status["isTriggerActive"]
        and _last_batch(query) == before
        and time.monotonic() < deadline
    ):
        time.sleep(LOOK_SECONDS)


def _last_batch(query: StreamingQuery) -> object:
    """The id of the last micro-batch ``query`` reported (None before any)."""
    progress = query.lastProgress
    return None if progress is None else progress["batchId"]


def release_session(session: SparkSession) -> None:
    """Close ``session``, a session of a query's own, once its query stopped or never started.

    On Spark Connect a query's session is a clone with a channel of its own, which Python keeps
    until it exits (each client registers an exit hook), and a session on the server: both are
    released here, not left to the interpreter's exit, where an open call left by a failed
    start blocks the channel's close. Not with ``session.stop()``, which in a process that
    started its local Connect server stops the server too. A classic session shares the
    context of the session it came from, which must go on: nothing is done.

    Examples
    --------
    >>> from dedup_lib import get_spark
    >>> spark = get_spark()
    >>> release_session(spark.newSession())
    >>> spark.range(2).count()
    2
    """
    if is_connect(session):
        # Best effort on the server's side: a session it holds idle expires there by itself.
        with contextlib.suppress(Exception):
            session.client.release_session()
        session.client.close()
