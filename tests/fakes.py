"""Stand-ins for what is outside Python, shared by the tests that need them."""

from __future__ import annotations

import stat
from pathlib import Path


def fake_java(tmp_path: Path, banner: str) -> Path:
    """A JAVA_HOME whose ``java -version`` prints ``banner``."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home
