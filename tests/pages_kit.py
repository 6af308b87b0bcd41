"""The pages a reader copies from, and the folder their examples run in: the README and the
guides (``PAGES``), their Python blocks (``BLOCK``) and shell blocks (``SHELL``), and a fresh
folder where the live guide's ``landing/`` holds the incident sample (:func:`enter_folder`).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from dedup_lib import sample_path

ROOT = Path(__file__).resolve().parents[1]
#: The README and the guides.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
#: A page's Python blocks.
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
#: A page's shell blocks.
SHELL = re.compile(r"^```(?:bash|console|sh)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def enter_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work in ``folder``, with ``landing/`` holding the incident sample, as the live guide's
    monitor reads it."""
    monkeypatch.chdir(folder)
    (folder / "landing").mkdir()
    shutil.copy(sample_path("incident.parquet"), folder / "landing")
