"""Reading a monitor's /metrics as Prometheus would: the text format, parsed back."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(address: tuple[str, int]) -> dict[tuple[str, tuple], float]:
    """Every sample at ``http://HOST:PORT/metrics``, by name and labels."""
    host, port = address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def summed(samples: dict, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()
    )


def probe(port: int, path: str) -> tuple[int, str]:
    """The status and body of ``http://127.0.0.1:PORT/PATH`` (a 503 or 404 too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
