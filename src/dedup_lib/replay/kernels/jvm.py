"""The replay kernel on the JVM: ``java/Replay.java``, compiled on first use and registered as a
Spark function per session.

The same pass as :func:`dedup_lib.replay.kernels.python.find_originals`, evaluated inside
Spark's own generated code instead of Spark's Python workers: the rows never cross into Python,
which is why it is the default (docs/decisions/replay-kernel.md). The class is compiled with
the JDK's ``javac`` (``JAVA_HOME`` first, then PATH; bytecode for Java 17, the oldest Spark 4
runs on) against the Spark jars that come with PySpark,
into a jar cached per user and named by a hash of its source, so an edited source is never
served from a stale jar. A local session loads it with ``ADD JAR``; a Spark Connect session
uploads it with ``addArtifacts``, so a remote cluster needs nothing installed (the client needs
a JDK and the full ``pyspark``, with its jars). Where it cannot be built or loaded,
:class:`JvmKernelUnavailable` says why, and the engine falls back to the Python kernel.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import weakref
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dedup_lib.errors import ToolMissingError
from dedup_lib.spark import cache_dir, is_connect, java_tool

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

SOURCE = Path(__file__).with_name("java") / "Replay.java"
#: The anchor rule both JVM walks call: this kernel and the live monitor's judge on the executors.
ANCHOR = Path(__file__).with_name("java") / "Anchor.java"
CLASS_NAME = "dedup_lib.Replay"
#: The bytecode level: the oldest Java that PySpark 4 runs on.
RELEASE = "17"


@dataclass
class _Loaded:
    """What one session has of the kernel: the jar it loaded and the function names it
    registered from it, each once (registering a name again makes Spark log a warning)."""

    jar: Path
    names: set[str] = field(default_factory=set)


_sessions: weakref.WeakKeyDictionary[SparkSession, _Loaded] = weakref.WeakKeyDictionary()
#: Builds that failed in this process, by the jar they were to make.
_failed: dict[Path, JvmKernelUnavailable] = {}


class JvmKernelUnavailable(ToolMissingError):  # noqa: N818 (a state, not a failure of the caller)
    """Raised when the JVM kernel cannot be built or loaded; the message says why and what to
    install. The engine then uses the Python kernel, which gives the same verdicts."""


def _javac() -> str | None:
    return java_tool("javac")


def _spark_jars() -> Path:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("spark-sql-api_*.jar")):
        raise JvmKernelUnavailable(
            f"the JVM replay kernel compiles against the Spark jars that come with PySpark, but "
            f"{jars} has no spark-sql-api jar (is only pyspark-client installed?)"
        )
    return jars


def jar_path() -> Path:
    """The jar holding :data:`CLASS_NAME`, compiled now if the cache lacks it.

    A build that failed is not tried again in this process: every later call raises the
    same error at once, instead of running ``javac`` again.
    """
    return built_jar([ANCHOR, SOURCE], "dedup-replay", "the JVM replay kernel")


def built_jar(sources: Sequence[Path], prefix: str, what: str) -> Path:
    """The jar of the classes compiled from ``sources``, named ``prefix`` and a hash of the
    sources, compiled now if the cache lacks it; ``what`` names it in errors.

    Examples
    --------
    >>> built_jar([ANCHOR, SOURCE], "dedup-replay", "the JVM replay kernel").name[:13]
    'dedup-replay-'
    """
    try:
        jar = cache_dir() / jar_name(sources, prefix)
        if jar.exists():
            return jar
    except (OSError, RuntimeError) as exc:
        raise JvmKernelUnavailable(
            f"cannot read {what}'s source {', '.join(map(str, sources))} or cache ({exc}): "
            "set DEDUP_LIB_CACHE to a readable, writable folder"
        ) from exc
    failed = _failed.get(jar)
    if failed is not None:
        raise failed
    try:
        return _compile(jar, sources, what)
    except JvmKernelUnavailable as exc:
        _failed[jar] = exc
        raise


def jar_name(sources: Sequence[Path], prefix: str) -> str:
    """The name of the jar :func:`built_jar` builds from ``sources``: ``prefix`` and a hash of
    the sources and of the bytecode level, known without a JDK.

    Raises
    ------
    OSError
        When a source cannot be read.

    Examples
    --------
    >>> jar_name([ANCHOR, SOURCE], "dedup-replay").endswith(".jar")
    True
    """
    code = b"".join(source.read_bytes() for source in sources)
    return f"{prefix}-{hashlib.sha256(code + RELEASE.encode()).hexdigest()[:16]}.jar"


def _compile(jar: Path, sources: Sequence[Path], what: str) -> Path:
    javac = _javac()
    if javac is None:
        raise JvmKernelUnavailable(
            f"no `javac` on PATH or in JAVA_HOME to build {what}: install a JDK "
            "17+ (Debian/Ubuntu: `apt-get install openjdk-17-jdk-headless`; conda: "
            "`conda install -c conda-forge openjdk=17`), not only a runtime"
        )
    try:
        jar.parent.mkdir(parents=True, exist_ok=True)
        return _build(javac, jar, sources)
    except OSError as exc:
        raise JvmKernelUnavailable(
            f"cannot write {what} to {jar.parent} ({exc.strerror or exc}): set "
            "DEDUP_LIB_CACHE to a writable folder"
        ) from exc


def _build(javac: str, jar: Path, sources: Sequence[Path]) -> Path:
    with tempfile.TemporaryDirectory(dir=jar.parent, prefix=".build-") as tmp:
        classes = Path(tmp) / "classes"
        command = [
            javac,
            "--release",
            RELEASE,
            "-nowarn",
            "-cp",
            str(_spark_jars() / "*"),
            "-d",
            str(classes),
            *map(str, sources),
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired as exc:
            raise JvmKernelUnavailable(f"`{javac}` did not finish: {exc}") from exc
        except OSError as exc:
            raise JvmKernelUnavailable(f"`{javac}` could not run: {exc}") from exc
        if done.returncode != 0:
            raise JvmKernelUnavailable(
                f"`{javac}` failed on {', '.join(map(str, sources))} (exit {done.returncode}):\n"
                f"{(done.stderr or done.stdout).strip()}"
            )
        built = Path(tmp) / jar.name
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        # Atomic: a process that races this one finds either no jar or a whole one.
        os.replace(built, jar)
    return jar


def replay_function(spark: SparkSession, returns: StructType) -> str:
    """The name under which ``spark`` knows the JVM kernel returning ``returns``.

    The name carries a hash of the jar and of the return type: a Spark Connect plan resolves
    the name only when it runs, so a later registration for another event id type must not
    replace the function an earlier result still calls.
    """
    jar = jar_path()
    loaded = _sessions.get(spark)
    if loaded is None or loaded.jar != jar:
        try:
            if is_connect(spark):
                spark.addArtifacts(str(jar))
            else:
                spark.sql("ADD JAR '" + str(jar).replace("\\", "\\\\").replace("'", "\\'") + "'")
        except Exception as exc:
            raise JvmKernelUnavailable(f"the session could not load {jar}: {exc}") from exc
        loaded = _sessions[spark] = _Loaded(jar)
    digest = hashlib.sha256((jar.name + returns.json()).encode()).hexdigest()[:16]
    name = f"dedup_lib_replay_{digest}"
    if name not in loaded.names:
        try:
            spark.udf.registerJavaFunction(name, CLASS_NAME, returns)
        except Exception as exc:
            raise JvmKernelUnavailable(
                f"the session could not register {CLASS_NAME} from {jar}: {exc}"
            ) from exc
        loaded.names.add(name)
    return name
