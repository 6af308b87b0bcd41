"""A real Prometheus server for tests (Debian's ``prometheus`` package, which .ci/run installs):
its own folder and free port, scraping a running monitor, evaluating the shipped rules."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from importlib import resources
from pathlib import Path

import pytest
import yaml

from dedup_lib.spark import free_port

RULES = resources.files("dedup_lib") / "resources" / "prometheus" / "dedup-rules.yml"
INSTALL = "install Debian's prometheus package (apt-get install prometheus): .ci/run does"


def tool(name: str) -> str:
    """The path of ``name`` (promtool, prometheus, amtool...), or the test skipped, saying why."""
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"no {name}: {INSTALL}")
    return found


class Prometheus:
    """A Prometheus server of the test's own: its folder, a free port, a scrape every second
    of ``target``, the rules (the shipped ones unless ``rules`` names others) evaluated every
    second."""

    def __init__(self, folder: Path, target: str, rules: Path | None = None) -> None:
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules or RULES)],
            "scrape_configs": [
                {"job_name": "dedup-lib", "static_configs": [{"targets": [target]}]}
            ],
        }
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = open(folder / "prometheus.log", "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                tool("prometheus"), f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn",
            ],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def get(self, path: str, **query: str) -> dict:
        url = f"http://127.0.0.1:{self.port}{path}?{urllib.parse.urlencode(query)}"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read())["data"]

    def firing(self) -> dict[str, list[dict]]:
        found: dict[str, list[dict]] = {}
        for alert in self.get("/api/v1/alerts")["alerts"]:
            if alert["state"] == "firing":
                found.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
        return found

    def value(self, query: str) -> float:
        result = self.get("/api/v1/query", query=query)["result"]
        return float(result[0]["value"][1]) if result else 0.0

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()
