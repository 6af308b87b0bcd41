"""The sample telemetry shipped with the package (``data/samples`` in the source tree), found
with :mod:`importlib.resources`, so an installed wheel has them too."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path

from dedup_lib.errors import MissingFileError

#: Where the samples are inside the package.
SAMPLES = files("dedup_lib") / "resources" / "samples"


def sample_path(name: str) -> str:
    """The local path of a shipped sample, such as ``day.parquet`` or ``entities-arm.json``."""
    entry = SAMPLES / name
    if not entry.is_file():
        known = sorted(p.name for p in SAMPLES.iterdir() if p.name != "README.md")
        raise MissingFileError(
            f"sample {name!r} is not among the shipped samples: "
            f"{', '.join(known) or 'none (run make samples)'}"
        )
    with as_file(entry) as path:
        return str(Path(path))
