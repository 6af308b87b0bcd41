"""The cluster kit's guard against a cluster left by a killed run (nothing is started)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_kit import CONNECT_STARTED, Cluster, ClusterError, serving, start


def test_a_cluster_left_running_is_named_and_a_dead_one_forgotten(tmp_path: Path) -> None:
    pids = tmp_path / "pids.json"
    pids.write_text(json.dumps({"master": os.getpid()}))
    with pytest.raises(ClusterError, match=rf"a previous run left master {os.getpid()} running"):
        start(tmp_path)
    assert pids.is_file()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    pids.write_text(json.dumps({"master": int(gone.stdout)}))
    with socket.create_server(("127.0.0.1", 0)) as held:  # the start stops at its port check
        port = held.getsockname()[1]
        with pytest.raises(ClusterError, match=f"{port} is taken"):
            start(tmp_path, master_port=port, connect_port=port)
    assert not pids.exists()


def test_the_connect_server_serves_when_it_says_so_not_when_its_port_opens(tmp_path: Path) -> None:
    """A run hung so: the worker took the Connect server's port first, the server failed to
    bind it, and the open port looked like the server."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        cluster = Cluster(tmp_path, master_port=1, connect_port=held.getsockname()[1])
        assert not serving(cluster)
        cluster.log("connect").write_text(f"... INFO SparkConnectServer: {CONNECT_STARTED} x\n")
        assert serving(cluster)
    assert not serving(cluster)
