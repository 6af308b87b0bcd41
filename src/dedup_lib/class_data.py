"""A class-data archive for the local Spark JVM (the JDK's AppCDS), so it starts warm.

A fresh Spark JVM loads and verifies some 20,000 classes while it starts and plans its first
queries: on a 2-core machine about a fifth of the time from a notebook's Run All to its first
chart. The JDK can keep those classes, parsed and verified, in an archive that later JVMs
map in. :func:`archive_options` gives the driver JVM's options for it:

- Java 19 and later manage the archive themselves (``-XX:+AutoCreateSharedArchive``): made at
  the first exit, remade when the JDK or the class path changes;
- on Java 17 and 18, the first JVM writes it when it exits (``-XX:ArchiveClassesAtExit``,
  about 190 MB) under a name of its own, which a later start adopts once the process that
  wrote it is gone; later JVMs read it (``-XX:SharedArchiveFile``). While one is being
  written, other JVMs start without it rather than write another.

The archive is named by the JDK, the pyspark version, the Spark jars and their folder, and
Spark's configuration folder (``SPARK_CONF_DIR``, which Spark puts on the JVM's class path), so
a JVM with another class path (another environment too) never reads it; a JVM that cannot use
an archive runs without one (sharing is an optimisation, never a requirement). The JDK
archives no class path with a non-empty folder on it: where that configuration folder has
files (a ``spark-defaults.conf``), no archive is written or read. Set ``DEDUP_CLASS_DATA=0``
to leave it out.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

#: The environment variable that turns the archive off ("0").
SWITCH = "DEDUP_CLASS_DATA"

#: A part file this much younger is taken to be still being written, whoever wrote it.
_SETTLED_S = 30.0


def archive_options(folder: Path, java: str, java_version: int) -> list[str]:
    """The driver JVM options that read (or on first use write) the archive kept in
    ``folder`` for ``java``; none when turned off, when the folder cannot be made, when Spark's
    configuration folder has files, or while another JVM is writing the archive."""
    if os.environ.get(SWITCH, "1") == "0" or _has_files(spark_conf_dir()):
        return []
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    archive = archive_path(folder, java)
    if java_version >= 19:
        return ["-XX:+AutoCreateSharedArchive", f"-XX:SharedArchiveFile={archive}"]
    writing = _settle(archive)
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}"]
    if writing:
        return []
    return [f"-XX:ArchiveClassesAtExit={archive.with_name(f'{archive.stem}.{os.getpid()}.part')}"]


def archive_path(folder: Path, java: str) -> Path:
    """Where the archive for ``java`` and this environment's class path is kept in ``folder``."""
    return folder / f"{_name(java)}.jsa"


def _settle(archive: Path) -> bool:
    """Settle the part files beside ``archive``: the first finished one (its writer gone,
    not written to lately) becomes ``archive`` if there is none, the other finished ones are
    removed. True when one is still being written."""
    writing = False
    for part in sorted(archive.parent.glob(f"{archive.stem}.*.part")):
        try:
            writer = int(part.name.removeprefix(f"{archive.stem}.").removesuffix(".part"))
            stat = part.stat()
        except (ValueError, OSError):
            continue
        if alive(writer) or time.time() - stat.st_mtime < _SETTLED_S:
            writing = True
            continue
        with contextlib.suppress(OSError):
            if not archive.exists() and stat.st_size > 0:
                part.replace(archive)
            else:
                part.unlink()
    return writing


def spark_conf_dir() -> Path:
    """The configuration folder a local Spark JVM has on its class path: ``SPARK_CONF_DIR``,
    else ``conf`` in ``SPARK_HOME`` (the pyspark package, when that is unset)."""
    explicit = os.environ.get("SPARK_CONF_DIR")
    if explicit:
        return Path(explicit)
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "conf"
    import pyspark

    return Path(pyspark.__file__).parent / "conf"


def _has_files(folder: Path) -> bool:
    try:
        return folder.is_dir() and any(folder.iterdir())
    except OSError:
        return False


def spark_jars() -> Path:
    """The folder of the jars a local Spark JVM has on its class path: pyspark's own."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _name(java: str) -> str:
    """``spark-<pyspark version>-<hash>``: the hash of the java binary (resolved), of Spark's
    configuration folder, of the jars folder (resolved: the JDK refuses an archive whose class
    path lies elsewhere, so a second environment with the same pyspark needs its own) and of
    the names and sizes of its jars: the class path the archive's must match."""
    import pyspark

    digest = hashlib.sha256(str(Path(java).resolve()).encode())
    digest.update(str(spark_conf_dir().resolve()).encode())
    with contextlib.suppress(OSError):
        digest.update(str(Path(java).resolve().stat().st_mtime_ns).encode())
    jars = spark_jars().resolve()
    digest.update(str(jars).encode())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return f"spark-{pyspark.__version__}-{digest.hexdigest()[:16]}"


def alive(pid: int) -> bool:
    """Whether process ``pid`` is running (this one counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
