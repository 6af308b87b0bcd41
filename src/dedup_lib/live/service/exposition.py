"""The monitor's HTTP endpoints, on the address ``--metrics`` names: ``/metrics`` (the
Prometheus text format, by ``prometheus-client``), ``/-/healthy`` and ``/-/ready`` (200 or
503, with a line that says why, as Prometheus's own endpoints answer), and 404 elsewhere.

A service manager or a container's health check asks ``/-/healthy`` (the process and its
micro-batch loop live); a load balancer or a rollout asks ``/-/ready`` (the state restored and
the folder scanned lately)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from dedup_lib.errors import InputError

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer
    from wsgiref.types import StartResponse, WSGIEnvironment

#: A probe's answer: whether it passes, and why not.
Answer = tuple[bool, str]


@dataclass(frozen=True)
class Probes:
    """What ``/-/healthy`` and ``/-/ready`` ask."""

    healthy: Callable[[], Answer]
    ready: Callable[[], Answer]


class _Quiet(WSGIRequestHandler):
    """No line on stderr per request: a scrape every 15 s would fill the journal."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _app(registry: CollectorRegistry, probes: Probes) -> Callable[..., Iterable[bytes]]:
    metrics = make_wsgi_app(registry)
    paths = {"/-/healthy": probes.healthy, "/-/ready": probes.ready}

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        probe = paths.get(path)
        if probe is None:
            status, text = "404 Not Found", "not found: /metrics, /-/healthy, /-/ready"
        else:
            passed, why = probe()
            status = "200 OK" if passed else "503 Service Unavailable"
            text = why
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [f"{text}\n".encode()]

    return app


def serve(registry: CollectorRegistry, address: str, probes: Probes) -> WSGIServer:
    """Serve the endpoints at ``address`` (``HOST:PORT``, port 0: any free one; an IPv6 host
    in brackets) in a thread of its own.

    Raises
    ------
    InputError
        ``address`` does not read as ``HOST:PORT``, or it cannot be listened at.
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"metrics: expected HOST:PORT, as 127.0.0.1:9464, got {address!r}")
    host = host.strip("[]")
    try:
        family = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][0]

        class Server(ThreadingWSGIServer):
            address_family = family

        server = make_server(host, int(port), _app(registry, probes), Server, handler_class=_Quiet)
    except OSError as exc:
        raise InputError(f"metrics: cannot listen at {address!r}: {exc.strerror or exc}") from None
    threading.Thread(target=server.serve_forever, name="dedup-metrics", daemon=True).start()
    return server
