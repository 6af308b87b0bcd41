"""The live monitor's options as typed records, one per concern: where and how it reads the
landing folder (:class:`ReadOptions`), what it judges beyond the policy and the lateness
(:class:`JudgeOptions`), what it writes beside the verdicts (:class:`WriteOptions`), what it
serves (:class:`ServeOptions`) and where it keeps its state (:class:`StateOptions`), gathered
in :class:`WatchOptions`, which :func:`dedup_lib.watch_duplicates` takes.

Each record is frozen, with a default for every field: a monitor's options are built whole,
and read, never changed; :meth:`WatchOptions.check` refuses what the state's mode does not
do. Nothing here imports Spark or pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from dedup_lib.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import timedelta

    from dedup_lib.telemetry.files import PathText


@dataclass(frozen=True)
class ReadOptions:
    """Where and how the monitor reads the landing folder.

    Parameters
    ----------
    format : str, optional
        ``parquet``, ``csv``, ``json`` or ``otlp`` (None: recognised from the files), as
        :func:`dedup_lib.load_telemetry` takes it.
    mapping : Mapping[str, str], optional
        Your column names to the canonical ones (``{"Id": "message_id"}``).
    entity : str, optional
        The entity of rows that name none.
    trigger : float or str, default "5 seconds"
        Seconds between micro-batches, or ``"500 milliseconds"``.
    settle : timedelta or str, default "PT5S"
        How long a text file must stay unchanged for a last record without its newline (or
        a compressed file) to count as whole.
    exclude : sequence of str, default ()
        Glob patterns of names never read (a writer's file in progress).

    Examples
    --------
    The OpenTelemetry Collector's rotating files, its active compressed file left alone,
    read every two seconds:

    >>> from dedup_lib import ReadOptions
    >>> reading = ReadOptions(format="otlp", trigger="2 seconds", exclude=("*.json.zst",))
    >>> reading.format, reading.trigger, reading.settle, reading.exclude
    ('otlp', '2 seconds', 'PT5S', ('*.json.zst',))
    """

    format: str | None = None
    mapping: Mapping[str, str] | None = None
    entity: str | None = None
    trigger: float | str = "5 seconds"
    settle: timedelta | str = "PT5S"
    exclude: Sequence[str] = ()


@dataclass(frozen=True)
class JudgeOptions:
    """What the monitor judges beyond each send's verdict: the content that tells one
    message from another (collisions), and how far back a resend counts.

    Parameters
    ----------
    content : sequence of str or str, optional
        The columns that tell one message's content from another's (None: those of
        :class:`dedup_lib.Evidence` found, ``payload_hash``; none found: no collision or
        resend alerts).
    resend_horizon : timedelta or str, default "PT1H"
        How far back an accepted copy of the same content makes an accepted send a resend
        that reached consumers again (an alert).

    Examples
    --------
    >>> from dedup_lib import JudgeOptions
    >>> JudgeOptions(content=["payload_hash"], resend_horizon="PT30M")
    JudgeOptions(content=['payload_hash'], resend_horizon='PT30M')
    """

    content: Sequence[str] | str | None = None
    resend_horizon: timedelta | str = "PT1H"


@dataclass(frozen=True)
class WriteOptions:
    """What the monitor writes beside the verdicts (``out``) and its checkpoint.

    Parameters
    ----------
    quarantine : str or os.PathLike, optional
        Folder of the rows the load refuses, with their reason (None: ``out`` +
        ``-quarantine``).
    alerts : str or os.PathLike, optional
        A file of JSON lines: one per collision, per resend that reached consumers again and
        per rejected send (None: none written; the counters still count them).

    Examples
    --------
    >>> from dedup_lib import WriteOptions
    >>> WriteOptions(alerts="alerts.jsonl")
    WriteOptions(quarantine=None, alerts='alerts.jsonl')
    """

    quarantine: PathText | None = None
    alerts: PathText | None = None


@dataclass(frozen=True)
class ServeOptions:
    """What the monitor serves while it runs.

    Parameters
    ----------
    metrics : str, optional
        ``HOST:PORT`` (port 0: any free one) where the Prometheus text format is served at
        ``/metrics``, with ``/-/healthy`` and ``/-/ready``, until :meth:`Watch.stop
        <dedup_lib.Watch.stop>` (None: nothing served).

    Examples
    --------
    >>> from dedup_lib import ServeOptions
    >>> ServeOptions(metrics="127.0.0.1:9464").metrics
    '127.0.0.1:9464'
    """

    metrics: str | None = None


@dataclass(frozen=True)
class StateOptions:
    """Where the monitor keeps the anchors it holds between micro-batches.

    Parameters
    ----------
    mode : {"driver", "executors"}, default "driver"
        ``driver``: in the driver's memory, its segments in the checkpoint
        (docs/decisions/live-state.md). ``executors``: in Spark's state store on the
        executors, judged in one long-running streaming query
        (docs/decisions/live-state-executors.md; a Spark Connect server needs the judge's
        plugin: :mod:`dedup_lib.live.executors.connect`); it writes verdicts, quarantined
        rows, lines, metrics and the alerts, the resends paired by a second query
        (:mod:`dedup_lib.live.executors.resends`). A checkpoint keeps the mode it was
        started with.
    memory : int, optional
        The most the driver's state may take in memory, in bytes; a micro-batch that could
        take it past is refused in a note that names ``executors``. Default: a quarter of
        the memory the process may use (its cgroup's limit, else the machine's).

    Examples
    --------
    >>> from dedup_lib import StateOptions
    >>> StateOptions().mode, StateOptions("executors").mode
    ('driver', 'executors')
    >>> StateOptions(memory=2 << 30).memory
    2147483648
    """

    mode: Literal["driver", "executors"] = "driver"
    memory: int | None = None


@dataclass(frozen=True)
class WatchOptions:
    """The live monitor's options beyond its folders and policy, by concern, each with its
    defaults: what :func:`dedup_lib.watch_duplicates` and ``dedup-lib watch`` take.

    Parameters
    ----------
    reading : ReadOptions, default ReadOptions()
        Where and how the landing folder is read.
    judging : JudgeOptions, default JudgeOptions()
        The content compared and the resend horizon.
    writing : WriteOptions, default WriteOptions()
        The quarantine folder and the alerts file.
    serving : ServeOptions, default ServeOptions()
        The metrics' address.
    state : StateOptions, default StateOptions()
        Where the state is kept.

    Examples
    --------
    Alerts appended to a file, metrics on any free port, a micro-batch every two seconds;
    the rest at its defaults:

    >>> from dedup_lib import ReadOptions, ServeOptions, WatchOptions, WriteOptions
    >>> options = WatchOptions(
    ...     reading=ReadOptions(trigger="2 seconds"),
    ...     writing=WriteOptions(alerts="alerts.jsonl"),
    ...     serving=ServeOptions(metrics="127.0.0.1:0"),
    ... )
    >>> options.writing.alerts, options.judging.resend_horizon, options.state.mode
    ('alerts.jsonl', 'PT1H', 'driver')
    """

    reading: ReadOptions = field(default_factory=ReadOptions)
    judging: JudgeOptions = field(default_factory=JudgeOptions)
    writing: WriteOptions = field(default_factory=WriteOptions)
    serving: ServeOptions = field(default_factory=ServeOptions)
    state: StateOptions = field(default_factory=StateOptions)

    def check(self) -> None:
        """Refuse what the options ask that the state's mode does not do, before anything
        starts.

        Raises
        ------
        InputError
            A mode that is not ``driver`` or ``executors``; a memory budget that is not a
            positive number of bytes, or asked of the state on the executors (whose state
            is Spark's, on disk).

        Examples
        --------
        >>> from dedup_lib import ServeOptions, StateOptions, WatchOptions
        >>> WatchOptions(serving=ServeOptions(metrics="127.0.0.1:0")).check()
        >>> from dedup_lib.errors import InputError
        >>> executors = WatchOptions(state=StateOptions("executors", memory=2**30))
        >>> try:
        ...     executors.check()
        ... except InputError as refused:
        ...     print(str(refused).split(":")[0])
        state 'executors' keeps its state in Spark's state store, not in the driver's memory
        """
        mode = self.state.mode
        if mode not in ("driver", "executors"):
            raise InputError(f"state: expected 'driver' or 'executors', got {mode!r}")
        memory = self.state.memory
        if memory is not None and memory <= 0:
            raise InputError(f"state memory: expected a positive number of bytes, got {memory}")
        if mode == "driver":
            return
        if memory is not None:
            raise InputError(
                "state 'executors' keeps its state in Spark's state store, not in the driver's "
                "memory: leave --state-memory out"
            )
