"""The test run's class-data archive (:mod:`dedup_lib.class_data`), written before its first
test: by ``tests/conftest.py`` as the workers finish collecting, or earlier by ``make test``,
beside lint and the docs (``python tests/class_data_kit.py``), where the JVM's 20-odd seconds
overlap work that leaves a core idle; the workers then find it written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def write_class_data() -> None:
    """The archive, written unless it is: one process writes it while the others (each
    pytest-xdist worker comes here) wait, under a lock of the run's own (``filelock``)."""
    from filelock import FileLock

    from dedup_lib.spark import cache_dir

    folder = cache_dir() / "jvm"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / "warm-up.lock"):
        _write(folder)


def _write(folder: Path, timeout: float = 300.0) -> None:
    """Write the run's class-data archive (:mod:`dedup_lib.class_data`) once, by a JVM that
    starts and exits, so that every JVM after it starts warm: a cold one costs some 13 s
    more (a local session 16.5 s against 6.4 s, 2026-11-27). Without this, the first JVM to
    exit writes it, and the first JVM is the tests' own session, which lives for most of the
    run. Waits for the JVM to finish writing (its command line names the file), then adopts
    the file rather than wait for :mod:`~dedup_lib.class_data` to take it as settled."""
    from dedup_lib.class_data import archive_path
    from dedup_lib.spark import check_java, class_data_options, java_tool

    java = java_tool("java")
    if java is None or os.environ.get("SPARK_REMOTE"):
        return
    if not class_data_options(check_java()) or archive_path(folder, java).is_file():
        return
    start = "from dedup_lib import get_spark; s = get_spark('class-data', master='local[1]')"
    subprocess.run([sys.executable, "-c", f"{start}; s.range(1).count(); s.stop()"],
                   check=True, timeout=timeout, capture_output=True)  # fmt: skip
    if not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + timeout
    while _named_by_a_process(folder) and time.monotonic() < deadline:
        time.sleep(1)
    parts = sorted(folder.glob("*.part"))
    archive = folder / f"{parts[0].name.rsplit('.', 2)[0]}.jsa" if parts else None
    if archive is not None and not archive.exists() and parts[0].stat().st_size > 0:
        parts[0].replace(archive)


def _named_by_a_process(folder: Path) -> bool:
    """Whether a running process's command line names ``folder`` (a JVM writing there)."""
    needle = str(folder).encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if needle in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False


def main() -> int:
    """Write the archive as a test run's JVMs will read it: the run's own environment first
    (the root ``conftest.py``: its cache folder, Spark's configuration folder and defaults,
    which make the class path)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import conftest  # sets the run's environment on import

    try:
        write_class_data()
    finally:
        conftest.remove_jvm_scratch()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
