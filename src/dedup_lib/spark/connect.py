"""Spark Connect: whether a session is one, and a local Connect server started in this
process on a free port of 127.0.0.1 (which sets ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` and PySpark's
Connect-mode variables in this process's environment, for it and its children)."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: What PySpark sets in a process that runs its local Connect server: they make the DataFrame
#: API build Connect plans, and stopping the Connect session stops the host too.
_CONNECT_MODE = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")


#: The address the local Connect server listens on: its clients are this process and its
#: children, on this machine. Without one, it listens on every interface, IPv4 and IPv6.
_CONNECT_HOST = "127.0.0.1"


#: What PySpark's own local Connect mode sets on the session that hosts the server, and the
#: address it listens on.
_CONNECT_SERVER = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.sql.artifact.isolation.enabled": "true",
    "spark.sql.artifact.isolation.alwaysApplyClassloader": "true",
    "spark.connect.grpc.binding.address": _CONNECT_HOST,
}


#: Where :func:`free_port` looks: below the ports the system hands to whoever binds port 0.
_PORTS_FROM = 20_000


def free_port() -> int:
    """A TCP port no one listens on now, for a server started a little later.

    Not one the system would choose for port 0 (Linux: 32768 to 60999): in the seconds before
    the server binds it, another process, or the server's own JVM opening its driver and
    block-manager ports, may be handed that one, and a Connect server then fails to bind while
    whoever took the port answers its clients (docs/decisions/spark-settings.md)."""
    below = _first_ephemeral_port()
    if below > _PORTS_FROM + 1000:
        for _ in range(50):
            port = _PORTS_FROM + secrets.randbelow(below - _PORTS_FROM)
            with socket.socket() as probe, contextlib.suppress(OSError):
                probe.bind(("", port))
                return port
    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _first_ephemeral_port() -> int:
    """Where the range the system picks ports for port 0 from begins (Linux's default
    elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


#: SQL settings of :data:`dedup_lib.spark.session.LOCAL_DEFAULTS` that a server takes only when
#: it starts: a Connect client that sets them again gets a warning each (in a notebook, on
#: its stderr).
STATIC_SQL = frozenset({"spark.sql.ui.retainedExecutions", "spark.sql.metadataCacheTTLSeconds"})


def client_settings(settings: dict[str, str]) -> dict[str, str]:
    """The settings a Connect client sets on its session: SQL ones, not the static."""
    return {k: v for k, v in settings.items() if k.startswith("spark.sql.") and k not in STATIC_SQL}


def _local_connect(app_name: str, master: str, settings: dict[str, str]) -> SparkSession:
    """A Spark Connect server in this process on a free port of 127.0.0.1, and a session of
    it.

    PySpark's ``remote("local[...]")`` always serves on port 15002, so it failed beside any
    other Connect server on the machine (a cluster's, another notebook's). The server runs
    in a local session started with ``settings``, as PySpark's does, and needs the token that
    this process and its children have in ``SPARK_CONNECT_AUTHENTICATE_TOKEN``.
    """
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    builder = ConnectSession.builder
    if ConnectSession.getActiveSession() is None:
        port = free_port()
        os.environ.setdefault("SPARK_CONNECT_AUTHENTICATE_TOKEN", secrets.token_hex(16))
        # Inherited from a parent's Connect run, these would make the host a Connect client.
        for name in _CONNECT_MODE:
            os.environ.pop(name, None)
        given = os.environ.pop("SPARK_REMOTE", None)
        try:
            host = SparkSession.builder.appName(app_name).master(master)
            server = {**_CONNECT_SERVER, "spark.connect.grpc.binding.port": str(port)}
            for key, value in {**settings, **server}.items():
                host = host.config(key, value)
            host.getOrCreate()
        finally:
            if given is not None:
                os.environ["SPARK_REMOTE"] = given
        os.environ.update(dict.fromkeys(_CONNECT_MODE, "1"))
        # "localhost", not the address: PySpark speaks TLS to any other host given a token.
        builder = builder.remote(f"sc://localhost:{port}")
    for key, value in client_settings(settings).items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # The client sets the host's settings again, and warns for each static one.
        warnings.filterwarnings("ignore", message="Failed to set .*CANNOT_MODIFY_CONFIG")
        return cast("SparkSession", builder.getOrCreate())


def is_connect(spark: SparkSession) -> bool:
    """True when ``spark`` is a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
