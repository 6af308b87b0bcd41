"""Option checks before Spark starts: an input this machine lacks is refused, unless a remote
Spark Connect server is to resolve it; ``--map`` pairs read as the loader's mapping."""

from __future__ import annotations

from argparse import Namespace

import pytest

from dedup_lib.cli.options import CommandError, column_mapping, existing_input, remote_cluster


@pytest.mark.parametrize(
    ("remote", "environment"),
    [("sc://127.0.0.1:15002", None), (None, "sc://cluster.example:443/;token=x")],
)
def test_a_remote_cluster_resolves_an_input_this_machine_lacks(
    monkeypatch: pytest.MonkeyPatch, remote: str | None, environment: str | None
) -> None:
    if environment is None:
        monkeypatch.delenv("SPARK_REMOTE", raising=False)
    else:
        monkeypatch.setenv("SPARK_REMOTE", environment)
    args = Namespace(remote=remote, spark=None)
    assert remote_cluster(args)
    existing_input("no/such.parquet", args)


@pytest.mark.parametrize("remote", [None, "local[2]"])
def test_a_local_session_refuses_an_input_this_machine_lacks(
    monkeypatch: pytest.MonkeyPatch, remote: str | None
) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    args = Namespace(remote=remote, spark=None)
    assert not remote_cluster(args)
    with pytest.raises(CommandError, match=r"^no/such\.parquet does not exist$"):
        existing_input("no/such.parquet", args)
    with pytest.raises(CommandError, match=r"^no/such\.parquet does not exist$"):
        existing_input("no/such.parquet")


def test_the_format_choices_are_the_loaders_formats():
    from dedup_lib.cli.options import TELEMETRY_FORMATS
    from dedup_lib.telemetry.formats import RECORD_FORMATS
    from dedup_lib.telemetry.schema import FORMATS

    assert (*FORMATS, *RECORD_FORMATS) == TELEMETRY_FORMATS


def test_a_map_splits_at_its_last_equals_sign() -> None:
    # A canonical name holds no '=', a source column may (a CSV header is any text).
    assert column_mapping(["a=b=message_id", "Id=send_time"]) == {
        "a=b": "message_id",
        "Id": "send_time",
    }
    for pair in ["oops", "=message_id", "Id="]:
        with pytest.raises(CommandError, match="expected SOURCE=CANONICAL"):
            column_mapping([pair])
