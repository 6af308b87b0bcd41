"""`make lint`'s duplicate-code check, as configured in pyproject.toml: six lines alike in two
files fail it, five do not (pylint's similarity checker; docstrings, comments, imports and
signatures do not count)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BODY = ["total = 0", "for i in range(x):", "    total += i * 3", "    total -= i // 2"]
BODY += ["total = total * 2", "total = total - 5"]


def _planted(folder: Path, lines: int) -> list[str]:
    """Two files whose functions share their first ``lines`` lines; pylint's messages."""
    for name, last in (("a", "return total + 1"), ("b", "return total - 1")):
        body = "\n".join(f"    {line}" for line in [*BODY[:lines], last])
        (folder / f"{name}_{lines}.py").write_text(f"def f(x):\n{body}\n")
    files = [str(folder / f"{n}_{lines}.py") for n in "ab"]
    argv = [sys.executable, "-m", "pylint", f"--rcfile={ROOT / 'pyproject.toml'}"]
    argv += ["--disable=all", "--enable=duplicate-code", "--score=n", *files]
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout.splitlines()


def test_six_lines_alike_fail_and_five_do_not(tmp_path: Path) -> None:
    assert any("duplicate-code" in line for line in _planted(tmp_path, 6))
    assert not any("duplicate-code" in line for line in _planted(tmp_path, 5))
