"""The monitor's endpoints: /metrics, /-/healthy and /-/ready answering 200 or 503 with why,
404 elsewhere, on the address asked for and no other."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Gauge

from dedup_lib.errors import InputError
from dedup_lib.live.service.exposition import Probes, serve
from metrics_kit import probe


def test_each_path_answers_and_any_other_is_404():
    registry = CollectorRegistry()
    Gauge("dedup_example", "an example", registry=registry).set(3)
    state = {"healthy": (True, "running"), "ready": (False, "restoring the state")}
    server = serve(
        registry,
        "127.0.0.1:0",
        Probes(lambda: state["healthy"], lambda: state["ready"]),
    )
    port = server.server_port
    try:
        status, text = probe(port, "/metrics")
        assert status == 200
        assert "dedup_example 3.0" in text
        assert probe(port, "/-/healthy") == (200, "running\n")
        assert probe(port, "/-/ready") == (503, "restoring the state\n")
        state["ready"] = (True, "ready")
        assert probe(port, "/-/ready") == (200, "ready\n")
        state["healthy"] = (False, "the micro-batch loop has stopped")
        assert probe(port, "/-/healthy")[0] == 503
        for path in ("/", "/metricsx", "/-/", "/favicon.ico", "/metrics/../-/ready"):
            assert probe(port, path)[0] == 404, path
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("address", ["9464", "localhost", ":9464", "127.0.0.1:x"])
def test_an_address_that_does_not_read_is_refused_in_a_sentence(address):
    with pytest.raises(InputError, match="expected HOST:PORT"):
        serve(CollectorRegistry(), address, Probes(lambda: (True, ""), lambda: (True, "")))


def test_a_port_taken_is_refused_in_a_sentence():
    first = serve(
        CollectorRegistry(), "127.0.0.1:0", Probes(lambda: (True, ""), lambda: (True, ""))
    )
    try:
        with pytest.raises(InputError, match="cannot listen at"):
            serve(
                CollectorRegistry(),
                f"127.0.0.1:{first.server_port}",
                Probes(lambda: (True, ""), lambda: (True, "")),
            )
    finally:
        first.shutdown()
        first.server_close()
