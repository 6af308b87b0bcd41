"""Which files a telemetry path means: exactly the ones the user named, nothing else.

Spark reads a path as a glob (``day[1].csv`` is a pattern that matches ``day1.csv``) and a
folder without recursion into folders that are not ``key=value`` partitions, silently. Here a
path is literal, a folder is read recursively, and hidden or bookkeeping entries (``_SUCCESS``,
``.crc`` checksums, ``_temporary``) are ignored and counted. Local paths are listed with the
standard library; other file systems (``abfss://``, ``hdfs://``, a remote Spark Connect
server's disk) through Spark, which skips hidden names itself, without telling which.

Under a remote Spark Connect session the cluster, not this machine, resolves a path: a URL
(``abfss://``, ``dbfs:/``, ``file:/``) goes as written, a path that exists here goes absolute
(the cluster finds it only if it shares this disk: one machine, a shared mount), and any other
path goes as written, for the cluster to resolve on its own file system.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from dedup_lib.errors import ClusterPathError, InputError, MissingFileError, printable
from dedup_lib.spark import is_connect, spark_errors, spark_message

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

#: A path as the public functions take it: text, or a ``pathlib.Path`` (any ``os.PathLike``).
PathText = str | os.PathLike[str]

_GLOB = re.compile(r"([\\{}\[\]*?])")
_PARTITION = re.compile(r"^[^=]+=.*$")
#: How far :func:`file_id` shifts the time a file was modified before mixing in its size.
_SIZE_BITS = 22
_BOOKKEEPING = ("_SUCCESS", "_temporary", "_committed_", "_started_", "_metadata")
#: A URL's scheme: two characters at least, so that ``C:\data`` stays a Windows path.
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")

#: The paths a cluster reads, for the message that says a path was not found there.
CLUSTER_URLS = (
    "abfss://<container>@<account>.dfs.core.windows.net/<path> (Azure Data Lake Storage)",
    "s3a://<bucket>/<path> (Amazon S3)",
    "gs://<bucket>/<path> (Google Cloud Storage)",
    "hdfs://<namenode>/<path>",
    "dbfs:/<path> or /Volumes/<catalog>/<schema>/<volume>/<path> (Databricks)",
    "file:/<path> on a disk every node of the cluster mounts",
)


@dataclass(frozen=True)
class InputFiles:
    """The data files under ``root``, and what was ignored with why.

    ``files`` are literal paths (or URIs) in a stable order; ``ignored`` maps a ignored
    entry's name, relative to ``root``, to the reason. ``partitioned`` is true when every file
    sits in ``key=value`` folders with the same keys, so those become columns. ``remote`` is
    true when a remote Spark Connect cluster reads them."""

    root: str
    files: list[str]
    ignored: dict[str, str] = field(default_factory=dict)
    partitioned: bool = False
    #: Read by a remote cluster, which resolves paths on its own file system.
    remote: bool = False

    def name(self, file: str) -> str:
        """A file as the user knows it: its path relative to the folder they named."""
        path = file_key(file)
        root = local_path(self.root) or self.root
        if path == root or not path.startswith(root.rstrip("/") + "/"):
            return printable(path)
        return printable(path[len(root.rstrip("/")) + 1 :])


def has_scheme(path: str) -> bool:
    """True when ``path`` is a URL (``abfss://``, ``dbfs:/``, ``file:/``), not a plain path."""
    return _SCHEME.match(path) is not None


def local_path(path: str) -> str | None:
    """``path`` on this machine's disk (a plain path or a ``file:`` URI), else None."""
    if path.startswith("file:"):
        return os.path.normpath(unquote(urlsplit(path).path))
    if has_scheme(path):
        return None
    return os.path.normpath(os.path.abspath(path))


def is_remote_session(spark: SparkSession) -> bool:
    """A Spark Connect server elsewhere reads its own disk, not this machine's (a local one,
    ``local[N]``, which pyspark marks with ``SPARK_LOCAL_REMOTE``, shares this one)."""
    return is_connect(spark) and not os.environ.get("SPARK_LOCAL_REMOTE")


def output_path(spark: SparkSession, path: str) -> str:
    """Where Spark is to write ``path``: a URL as written; a plain path made absolute under a
    remote session, since the cluster writes it and would resolve a relative one against its
    own working directory (the same disk as this machine's only on a one-machine cluster)."""
    if has_scheme(path) or not is_remote_session(spark):
        return path
    return os.path.abspath(path)


def not_on_cluster(path: str, caller: str, *, here: bool) -> ClusterPathError:
    """The error for a path a remote cluster did not find: which path, that the cluster
    resolved it (``here``: although this machine has it), and the URLs a cluster reads."""
    if here:
        where = "it is on this machine, but the cluster reads its own file system, which lacks it"
    elif local_path(path) is None:
        where = "the cluster, which resolved it, does not find it"
    else:
        where = (
            "not on this machine, and the cluster, which resolved it on its own file system "
            "(a relative path from the Spark Connect server's working directory), does not find it"
        )
    return ClusterPathError(
        f"{caller}: {printable(path)} does not exist: {where}. Give a path the cluster reads: "
        + "; ".join(CLUSTER_URLS)
    )


def file_key(file: str) -> str:
    """One spelling per file, however Spark or the listing wrote it: a local path, else the
    URI without percent-encoding (Spark's ``_metadata.file_path`` encodes, a listing does not)."""
    return local_path(file) or unquote(file)


def file_id(metadata: Column) -> Column:
    """A number per file, from Spark's ``_metadata`` column: its time modified (ms) shifted,
    then its size mixed in. Read as constants of each file, it costs nothing per row, where a
    hash of the path took a fifth of a load of narrow rows; two files may share one, which
    :func:`local_file_ids` tells."""
    from pyspark.sql import functions as F  # here: the command line imports this module bare

    modified = F.unix_millis(metadata.getField("file_modification_time"))
    return F.shiftleft(modified, _SIZE_BITS).bitwiseXOR(metadata.getField("file_size"))


def spark_long(value: int) -> int:
    """``value`` as a Spark long holds it: its low 64 bits, signed (shifts wrap there)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def local_file_ids(files: InputFiles) -> dict[int, str] | None:
    """Each listed file by its :func:`file_id`, from this machine's disk; None when another
    machine reads them, or two of them share one (the file's rows could not be told apart)."""
    if files.remote:
        return None
    ids: dict[int, str] = {}
    for file in files.files:
        local = local_path(file)
        try:
            status = os.stat(local) if local is not None else None
        except OSError:
            status = None
        if status is None:
            return None
        number = spark_long(((status.st_mtime_ns // 1_000_000) << _SIZE_BITS) ^ status.st_size)
        if number in ids:
            return None
        ids[number] = file
    return ids


def spark_path(path: str) -> str:
    """``path`` as Spark must be given it to read that one file: glob characters escaped."""
    return _GLOB.sub(r"\\\1", path)


def skip_reason(name: str) -> str | None:
    """Why an entry in a folder is not telemetry (Spark and Hadoop skip the same names)."""
    if name.endswith(".crc"):
        return "checksum file"
    if name.startswith(_BOOKKEEPING) or name.endswith("._COPYING_"):
        return "Spark/Hadoop bookkeeping"
    if name.startswith((".", "_")):
        return "hidden"
    return None


def list_input(spark: SparkSession, path: str, caller: str = "load_telemetry") -> InputFiles:
    """The files ``path`` names: itself if a file, else every data file below it."""
    remote = is_remote_session(spark)
    local = local_path(path)
    if local is not None and os.path.exists(local):
        return _list_local(path, local, caller, remote)
    if local is not None and not remote:
        raise MissingFileError(f"{caller}: {printable(path)} does not exist")
    return _list_with_spark(spark, path, caller, remote)


def _list_local(path: str, local: str, caller: str, remote: bool) -> InputFiles:
    if not os.path.isdir(local):
        if not os.access(local, os.R_OK):
            raise InputError(f"{caller}: cannot read {printable(path)}: permission denied")
        return InputFiles(root=local, files=[local], remote=remote)
    files: list[str] = []
    ignored: dict[str, str] = {}
    partition_keys: set[tuple[str, ...]] = set()

    def failed(error: OSError) -> None:
        raise InputError(
            f"{caller}: cannot list {printable(error.filename or path)}: {error.strerror}"
        )

    for folder, dirs, names in os.walk(local, onerror=failed, followlinks=True):
        relative = os.path.relpath(folder, local)
        for name in sorted(dirs):
            reason = skip_reason(name)
            if reason is not None:
                ignored[os.path.normpath(os.path.join(relative, name)) + "/"] = reason
        dirs[:] = sorted(d for d in dirs if skip_reason(d) is None)
        levels = () if relative == "." else tuple(relative.split(os.sep))
        for name in sorted(names):
            reason = skip_reason(name)
            if reason is not None:
                ignored[os.path.normpath(os.path.join(relative, name))] = reason
                continue
            files.append(os.path.join(folder, name))
            keys = tuple(p.split("=", 1)[0] for p in levels)
            partition_keys.add(keys if all(_PARTITION.match(p) for p in levels) else ("/",))
    partitioned = len(partition_keys) == 1 and next(iter(partition_keys)) not in ((), ("/",))
    return InputFiles(
        root=local, files=files, ignored=ignored, partitioned=partitioned, remote=remote
    )


def _list_with_spark(spark: SparkSession, path: str, caller: str, remote: bool) -> InputFiles:
    try:
        uris = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(spark_path(path))
            .inputFiles()
        )
    except spark_errors() as exc:
        if "PATH_NOT_FOUND" in str(exc) and remote:
            raise not_on_cluster(path, caller, here=False) from None
        if "PATH_NOT_FOUND" in str(exc):
            raise MissingFileError(f"{caller}: {printable(path)} does not exist") from exc
        message = printable(spark_message(exc))
        raise InputError(f"{caller}: cannot list {printable(path)}: {message}") from exc
    return InputFiles(root=path, files=sorted(unquote(uri) for uri in uris), remote=remote)
