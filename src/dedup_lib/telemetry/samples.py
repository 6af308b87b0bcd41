"""The sample telemetry shipped with the package (``data/samples`` in the source tree), found
with :mod:`importlib.resources`, so an installed wheel has them too."""

from __future__ import annotations

import os
from importlib.resources import as_file, files
from pathlib import Path
from typing import TYPE_CHECKING

from dedup_lib.errors import MissingFileError

if TYPE_CHECKING:
    from dedup_lib.telemetry.files import PathText

#: Where the samples are inside the package.
SAMPLES = files("dedup_lib") / "resources" / "samples"


def sample_path(name: str) -> str:
    """The local path of a telemetry sample shipped with the package.

    Parameters
    ----------
    name : str
        The sample's name in ``data/samples`` (its README describes each): ``day.parquet``
        (200 k sends of a day), ``incident.parquet``, ``incident-otlp.jsonl.gz``,
        ``entities-arm.json`` ...

    Returns
    -------
    str
        A path on the local disk, to pass to :func:`dedup_lib.load_telemetry`.

    Raises
    ------
    MissingFileError
        No sample has that name: the message lists those there are.

    Examples
    --------
    The path is under the installed package (here relative to it):

    >>> from pathlib import Path
    >>> import dedup_lib
    >>> from dedup_lib import sample_path
    >>> package = Path(dedup_lib.__file__).parent
    >>> Path(sample_path("incident.parquet")).relative_to(package).as_posix()
    'resources/samples/incident.parquet'
    """
    entry = SAMPLES / name
    if not entry.is_file():
        known = sorted(p.name for p in SAMPLES.iterdir() if p.name != "README.md")
        raise MissingFileError(
            f"sample {name!r} is not among the shipped samples: "
            f"{', '.join(known) or 'none (run make samples)'}"
        )
    with as_file(entry) as path:
        return str(Path(path))


#: The environment variable through which ``make lab INPUT=...`` names the telemetry every
#: notebook reads when its ``INPUT`` parameter is left at None.
INPUT_VARIABLE = "DEDUP_INPUT"
#: What ships with a sample, by the sample's name: entity settings, an export of what the
#: broker kept.
_WITH_SAMPLE = {
    "day.parquet": {"settings": "entities-arm.json"},
    "day-azure.csv.gz": {"settings": "entities-arm.json"},
    "incident.parquet": {"kept": "incident-kept/orders.json.gz"},
}


def notebook_input(given: PathText | None, sample: str) -> str:
    """The telemetry a notebook reads.

    Parameters
    ----------
    given : str or os.PathLike or None
        The notebook's ``INPUT`` parameter.
    sample : str
        The shipped sample read when neither ``given`` nor ``make lab INPUT=...``
        (:data:`INPUT_VARIABLE`) names one.

    Returns
    -------
    str
        ``given``, else what ``make lab INPUT=...`` named, else the sample's path.

    Examples
    --------
    >>> import os
    >>> from pathlib import Path
    >>> import dedup_lib
    >>> from dedup_lib import notebook_input
    >>> notebook_input("sends.parquet", "day.parquet")
    'sends.parquet'
    >>> os.environ["DEDUP_INPUT"] = "landing/"  # as make lab INPUT=landing/ sets it
    >>> notebook_input(None, "day.parquet")
    'landing/'
    >>> del os.environ["DEDUP_INPUT"]
    >>> package = Path(dedup_lib.__file__).parent
    >>> Path(notebook_input(None, "day.parquet")).relative_to(package).as_posix()
    'resources/samples/day.parquet'
    """
    return os.fspath(given or os.environ.get(INPUT_VARIABLE) or sample_path(sample))


def is_shipped_sample(path: str) -> bool:
    """Whether ``path`` is one of the shipped samples (a file of them, or their folder)."""
    with as_file(SAMPLES) as folder:
        samples = Path(folder).resolve()
    here = Path(path).resolve()
    return here == samples or samples in here.parents


def shipped_with(path: PathText, what: str) -> str | None:
    """The file shipped with a sample: its entities' settings or the broker's export.

    The samples' settings and export describe the samples, never an analyst's own
    telemetry: for any other path the answer is None.

    Parameters
    ----------
    path : str or os.PathLike
        A path, shipped sample or not.
    what : {"settings", "kept"}
        The entities' settings, or the export of what the broker kept.

    Returns
    -------
    str or None
        The file's path, or None when ``path`` is not a shipped sample or has none.

    Examples
    --------
    >>> from pathlib import Path
    >>> import dedup_lib
    >>> from dedup_lib import sample_path, shipped_with
    >>> package = Path(dedup_lib.__file__).parent
    >>> kept = shipped_with(sample_path("incident.parquet"), "kept")
    >>> Path(kept).relative_to(package).as_posix()
    'resources/samples/incident-kept/orders.json.gz'
    >>> shipped_with("my-sends.parquet", "kept") is None
    True
    """
    for name, extras in _WITH_SAMPLE.items():
        if what in extras and Path(path).resolve() == Path(sample_path(name)).resolve():
            return sample_path(extras[what])
    return None
