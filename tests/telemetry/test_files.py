"""Where a path is resolved: on this machine, or, under a remote Spark Connect session, by the
cluster, with an error naming the path and the URLs a cluster reads when it is not there."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dedup_lib import load_telemetry
from dedup_lib.errors import ClusterPathError, InputError, MissingFileError
from dedup_lib.spark import is_connect
from dedup_lib.telemetry.files import (
    InputFiles,
    file_id,
    has_scheme,
    is_remote_session,
    list_input,
    local_file_ids,
    local_path,
    output_path,
)
from dedup_lib.telemetry.sources import read_failure, read_sources
from dedup_lib.telemetry.write import write_telemetry

ROOT = Path(__file__).resolve().parents[2]
DAY = "data/samples/day.parquet"
NOT_FOUND = "[PATH_NOT_FOUND] Path does not exist: file:/nowhere/day.parquet. SQLSTATE: 42K03"


class ConnectSession:
    """What :func:`is_remote_session` looks at: a session class of pyspark's Connect client."""


ConnectSession.__module__ = "pyspark.sql.connect.session"


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A session that counts as a remote Spark Connect server (no local one's marker)."""
    monkeypatch.delenv("SPARK_LOCAL_REMOTE", raising=False)
    return ConnectSession()


@pytest.mark.parametrize(
    "url",
    [
        "abfss://sends@acct.dfs.core.windows.net/day.parquet",
        "s3a://bucket/day.parquet",
        "gs://bucket/day.parquet",
        "hdfs://namenode:8020/day.parquet",
        "dbfs:/mnt/day.parquet",
        "file:/tmp/day.parquet",
    ],
)
def test_a_url_goes_to_the_cluster_as_written(remote: Any, url: str) -> None:
    assert has_scheme(url)
    assert output_path(remote, url) == url
    if not url.startswith("file:"):
        assert local_path(url) is None


@pytest.mark.parametrize("path", [DAY, "/data/day.parquet", "C:\\data\\day.parquet", "day.csv"])
def test_a_plain_path_is_not_a_url(path: str) -> None:
    assert not has_scheme(path)
    assert local_path(path) == os.path.normpath(os.path.abspath(path))


def test_a_remote_session_writes_a_relative_path_as_an_absolute_one(
    remote: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert is_remote_session(remote)
    assert output_path(remote, "out/verdicts.parquet") == str(tmp_path / "out/verdicts.parquet")
    assert output_path(remote, "/abs/verdicts.parquet") == "/abs/verdicts.parquet"


def test_a_local_connect_server_shares_this_machines_paths(
    remote: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_REMOTE", "1")
    assert not is_remote_session(remote)
    assert output_path(remote, "out/verdicts.parquet") == "out/verdicts.parquet"


def test_a_path_this_machine_has_is_sent_absolute(
    remote: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    listed = list_input(remote, DAY)
    assert listed.files == [str(ROOT / DAY)]
    assert listed.remote


def test_the_cluster_missing_a_file_of_this_machine_says_so(tmp_path: Path) -> None:
    here = tmp_path / "day.parquet"
    here.write_bytes(b"PAR1")
    files = InputFiles(root=str(here), files=[str(here)], remote=True)
    error = read_failure(RuntimeError(NOT_FOUND), files, "parquet", "load_telemetry")
    assert isinstance(error, ClusterPathError)
    assert isinstance(error, InputError)
    assert isinstance(error, MissingFileError)
    message = str(error)
    assert message.startswith(f"load_telemetry: {here} does not exist: it is on this machine")
    assert "the cluster reads its own file system, which lacks it" in message
    assert "abfss://<container>@<account>.dfs.core.windows.net/<path>" in message
    assert "dbfs:/<path>" in message


def test_a_url_the_cluster_does_not_find_is_named_as_given() -> None:
    url = "abfss://sends@acct.dfs.core.windows.net/day.parquet"
    files = InputFiles(root=url, files=[url], remote=True)
    message = str(read_failure(RuntimeError(NOT_FOUND), files, "parquet", "load_telemetry"))
    assert message.startswith(
        f"load_telemetry: {url} does not exist: the cluster, which resolved it, does not find it."
    )


def test_a_local_session_missing_a_file_is_a_plain_read_failure(tmp_path: Path) -> None:
    files = InputFiles(root=str(tmp_path / "day.parquet"), files=[str(tmp_path / "day.parquet")])
    error = read_failure(RuntimeError(NOT_FOUND), files, "parquet", "load_telemetry")
    assert not isinstance(error, ClusterPathError)


def _remote_connect(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local Connect server taken for a remote one: it resolves what the client lacks."""
    if not is_connect(spark):
        pytest.skip("path resolution by a Spark Connect server: the Connect pass")
    monkeypatch.delenv("SPARK_LOCAL_REMOTE", raising=False)


def _server_directory(spark: Any) -> Path:
    row = spark.sql("SELECT java_method('java.lang.System', 'getProperty', 'user.dir')").first()
    return Path(row[0])


@pytest.mark.connect
def test_a_path_the_cluster_does_not_find_names_it_and_the_urls_it_reads(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _remote_connect(spark, monkeypatch)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ClusterPathError) as raised:
        load_telemetry(spark, "no/such/day.parquet")
    message = str(raised.value)
    assert message.startswith("load_telemetry: no/such/day.parquet does not exist: not on this")
    assert "the cluster, which resolved it on its own file system" in message
    assert "abfss://<container>@<account>.dfs.core.windows.net/<path>" in message
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__


@pytest.mark.connect
def test_a_relative_path_this_machine_lacks_is_resolved_by_the_cluster(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _remote_connect(spark, monkeypatch)
    server = _server_directory(spark)
    relative = os.path.relpath(ROOT / "data/samples/incident.parquet", server)
    monkeypatch.chdir(tmp_path)
    assert not Path(relative).exists()
    loaded = load_telemetry(spark, relative)
    assert (
        loaded.counts()
        == load_telemetry(spark, str(ROOT / "data/samples/incident.parquet")).counts()
    )
    assert loaded.files["file"].tolist() == [str(ROOT / "data/samples/incident.parquet")]


@pytest.mark.connect
def test_files_listed_here_that_the_cluster_lacks_are_named(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _remote_connect(spark, monkeypatch)
    gone = tmp_path / "gone.parquet"
    files = InputFiles(root=str(gone), files=[str(gone)], remote=True)
    with pytest.raises(ClusterPathError, match=r"gone\.parquet does not exist: not on this"):
        read_sources(spark, files, "parquet", "load_telemetry")


@pytest.mark.connect
def test_a_remote_session_writes_a_relative_path_where_this_machine_means_it(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _remote_connect(spark, monkeypatch)
    server = _server_directory(spark)
    relative = f"dedup-test-output-{os.getpid()}/sends.parquet"
    monkeypatch.chdir(tmp_path)
    sends = load_telemetry(spark, str(ROOT / "data/samples/incident.parquet")).valid.limit(10)
    try:
        write_telemetry(sends, relative)
        assert not (server / relative).exists()
    finally:
        shutil.rmtree(server / relative.split("/")[0], ignore_errors=True)
    assert len(pd.read_parquet(tmp_path / relative)) == 10


def _three_files(tmp_path: Path) -> list[str]:
    paths = []
    for name, text in (
        ("a.csv", "message_id\nm1\n"),
        ("b.csv", "message_id\nm22\n"),
        ("c.csv", ""),
    ):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    return paths


def test_local_files_are_numbered_by_size_and_time_modified(tmp_path: Path) -> None:
    paths = _three_files(tmp_path)
    ids = local_file_ids(InputFiles(root=str(tmp_path), files=paths))
    assert ids is not None
    assert sorted(ids.values()) == paths


def test_files_of_the_same_size_modified_the_same_millisecond_get_no_numbers(
    tmp_path: Path,
) -> None:
    paths = _three_files(tmp_path)
    (tmp_path / "b.csv").write_text("message_id\nm2\n", encoding="utf-8")
    # A whole millisecond, set on both: the disk's own stamps can sit anywhere in theirs
    # (a coarse clock ticks at one offset), and 999 ns more could cross into the next.
    stamp = os.stat(paths[0]).st_mtime_ns // 1_000_000 * 1_000_000
    os.utime(paths[0], ns=(stamp, stamp))
    os.utime(paths[1], ns=(stamp, stamp + 999_999))
    assert local_file_ids(InputFiles(root=str(tmp_path), files=paths)) is None
    os.utime(paths[1], ns=(stamp, stamp + 1_000_000))
    assert local_file_ids(InputFiles(root=str(tmp_path), files=paths)) is not None


def test_files_read_elsewhere_or_gone_get_no_numbers(tmp_path: Path) -> None:
    paths = _three_files(tmp_path)
    assert local_file_ids(InputFiles(root=str(tmp_path), files=paths, remote=True)) is None
    url = "abfss://c@a.dfs.core.windows.net/x.csv"
    assert local_file_ids(InputFiles(root=str(tmp_path), files=[*paths, url])) is None
    gone = str(tmp_path / "gone.csv")
    assert local_file_ids(InputFiles(root=str(tmp_path), files=[*paths, gone])) is None


@pytest.mark.connect
@pytest.mark.spark
def test_spark_numbers_each_file_as_this_machine_does(spark: Any, tmp_path: Path) -> None:
    paths = _three_files(tmp_path)[:2]
    ids = local_file_ids(InputFiles(root=str(tmp_path), files=paths))
    frame = spark.read.option("header", True).csv(paths)
    numbered = frame.select(file_id(frame.metadataColumn("_metadata")).alias("id"))
    assert ids is not None
    assert sorted(int(row["id"]) for row in numbered.collect()) == sorted(ids)
