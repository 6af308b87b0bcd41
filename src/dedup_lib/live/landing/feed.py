"""A stream to watch when none is at hand: telemetry landed in a folder file by file, one
every few seconds (the live notebook's demo, the tests). A Parquet file is cut into several
files in send-time order; a folder lands one file per step; any other file lands whole. Each
file is written under a hidden name, then renamed, as a pipeline should: the monitor never
reads half a file. pyarrow only: no Spark."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pyarrow.parquet as pq

from dedup_lib.errors import InputError, printable

if TYPE_CHECKING:
    from dedup_lib.telemetry.files import PathText

#: The landings under way in this process, by folder: a new one into a folder ends the one
#: before it (a notebook run again would otherwise get the earlier run's files in its own).
_LANDING: dict[str, threading.Event] = {}
_LOCK = threading.Lock()


def land_in_steps(
    source: PathText, folder: PathText, files: int = 6, every: float = 5.0, *, start: bool = True
) -> threading.Thread:
    """Land a telemetry file in a folder in steps, as a live feed would: for trying the
    live monitor on a sample.

    A landing into the same folder started later in this process ends this one, and so
    does the folder's removal.

    Parameters
    ----------
    source : str or os.PathLike
        A file of sends. A Parquet file becomes ``files`` files in send-time order (times
        in microseconds); another is landed whole.
    folder : str or os.PathLike
        Where the files land, each written under a hidden name, then renamed.
    files : int, default 6
        How many files a Parquet source becomes.
    every : float, default 5.0
        Seconds between two files.
    start : bool, default True
        Start the thread that lands the files after the first.

    Returns
    -------
    threading.Thread
        The thread landing the rest (started unless ``start`` is false); the first file is
        there when this returns.

    Examples
    --------
    >>> import os
    >>> from dedup_lib import land_in_steps, sample_path
    >>> feed = land_in_steps(sample_path("incident.parquet"), "landing", files=3, every=0.1)
    >>> feed.join()
    >>> sorted(os.listdir("landing"))
    ['incident-0000.parquet', 'incident-0001.parquet', 'incident-0002.parquet']
    """
    source, folder = os.fspath(source), os.fspath(folder)
    if not os.path.exists(source):
        raise InputError(f"land_in_steps: {printable(source)} does not exist")
    steps = _steps(source, folder, files)
    ended = threading.Event()
    with _LOCK:
        earlier = _LANDING.get(os.path.abspath(folder))
        if earlier is not None:
            earlier.set()
        _LANDING[os.path.abspath(folder)] = ended
    os.makedirs(folder, exist_ok=True)
    if steps:
        steps.pop(0)()

    def land() -> None:
        for step in steps:
            if ended.wait(every):
                return
            try:
                step()
            except FileNotFoundError:
                if os.path.isdir(folder) and not ended.is_set():
                    raise
                return

    thread = threading.Thread(target=land, name="dedup-land-in-steps", daemon=True)
    if start:
        thread.start()
    return thread


def _steps(source: str, folder: str, files: int) -> list[Callable[[], None]]:
    if os.path.isdir(source):
        found = sorted(
            os.path.join(root, name)
            for root, _, names in os.walk(source)
            for name in names
            if not name.startswith((".", "_"))
        )
        return [lambda f=f: _copy(f, folder) for f in found]  # type: ignore[misc]
    if not source.endswith(".parquet"):
        return [lambda: _copy(source, folder)]
    table = pq.read_table(source)
    if "send_time" in table.column_names:
        table = table.take(pc.sort_indices(table, [("send_time", "ascending")]))
    size = max(1, -(-table.num_rows // files))
    stem = os.path.basename(source).removesuffix(".parquet")

    def part(i: int) -> None:
        hidden = os.path.join(folder, f".landing-{i:04d}.parquet")
        pq.write_table(
            table.slice(i * size, size), hidden, coerce_timestamps="us",
            allow_truncated_timestamps=True,
        )  # fmt: skip
        os.replace(hidden, os.path.join(folder, f"{stem}-{i:04d}.parquet"))

    return [lambda i=i: part(i) for i in range(-(-table.num_rows // size))]  # type: ignore[misc]


def _copy(file: str, folder: str) -> None:
    name = os.path.basename(file)
    hidden = os.path.join(folder, f".landing-{name}")
    shutil.copyfile(file, hidden)
    os.replace(hidden, os.path.join(folder, name))
