"""The judge on a Spark Connect server (the test run's local one, started with the plugin as
``watch --state executors`` starts one): a server that answers as this client judges passes the
check; one whose plugin is another version's, or that has none for the relation, is refused in
a sentence that says what to do."""

from __future__ import annotations

import pytest

from dedup_lib.live.executors.processor import check_server
from dedup_lib.replay.kernels.jvm import JvmKernelUnavailable
from dedup_lib.spark import is_connect

pytestmark = [pytest.mark.spark, pytest.mark.connect]


@pytest.fixture
def server(spark):
    if not is_connect(spark):
        pytest.skip("a Spark Connect server's plugin: the Connect pass")
    return spark


def test_a_server_with_this_version_s_judge_passes(server):
    check_server(server)


def test_a_server_with_another_version_s_judge_names_both(server):
    with pytest.raises(JvmKernelUnavailable) as caught:
        check_server(server, jar="dedup-live-0000000000000000.jar")
    said = str(caught.value)
    assert said.startswith("this Spark Connect server judges with dedup-live-")
    assert "the client's dedup-lib with dedup-live-0000000000000000.jar" in said
    assert "`dedup-lib connect-options`" in said
    assert "\n" not in said


def test_a_server_without_the_judge_says_what_to_do(server):
    with pytest.raises(JvmKernelUnavailable, match="has no dedup-lib judge") as caught:
        check_server(server, kind="dedup_lib.NotServed")
    assert "--master (classic Spark) or --state driver" in str(caught.value)
