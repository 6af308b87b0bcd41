"""A real Prometheus server for tests (Debian's ``prometheus`` package, which .ci/run installs):
its own folder and free port, scraping a running monitor, evaluating the shipped rules; and a
real Alertmanager (Debian's ``prometheus-alertmanager``) it sends its alerts to, notifying a
webhook of the test's own (:class:`Webhook`). :func:`page_the_day` runs them all once around a
monitor judging the day sample, for the tests that read what a collision page leaves."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from dedup_lib.spark import free_port

RESOURCES = resources.files("dedup_lib") / "resources"
#: The rules template the package ships (``dedup-lib rules`` writes it for a job).
RULES = RESOURCES / "prometheus" / "dedup-rules.yml"
#: The example Alertmanager configuration the package ships.
ALERTMANAGER = RESOURCES / "alertmanager" / "alertmanager.yml"
PACKAGES = {"prometheus": "prometheus", "promtool": "prometheus"}
#: The scrape job and runbooks' base URL the shared scenario's rules are written for.
JOB = "dedup-e2e"
RUNBOOKS = "https://runbooks.example/dedup"


def tool(*names: str) -> str:
    """The path of the first of ``names`` found (promtool, prometheus, amtool...; Debian names
    Alertmanager's server ``prometheus-alertmanager``), or the test skipped, saying why."""
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    package = PACKAGES.get(names[0], "prometheus-alertmanager")
    pytest.skip(
        f"no {' or '.join(names)}: install Debian's {package} package "
        f"(apt-get install {package}): .ci/run does"
    )


class Prometheus:
    """A Prometheus server of the test's own: its folder, a free port, a scrape every second
    of ``target`` as scrape job ``job``, the rules (the shipped ones unless ``rules`` names
    others) evaluated every second, its alerts sent to ``alertmanager`` (HOST:PORT) if given."""

    def __init__(
        self,
        folder: Path,
        target: str,
        rules: Path | None = None,
        *,
        job: str = "dedup-lib",
        alertmanager: str | None = None,
    ) -> None:
        self.port = free_port()
        config: dict = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules or RULES)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}],
        }
        if alertmanager is not None:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]
            }
        self.config = folder / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
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

    def firing(self, at: float | None = None) -> dict[str, list[dict]]:
        """The firing alerts' labels by alert name: now, or at the time ``at`` (seconds since
        the epoch), as the ``ALERTS`` series the rules' evaluations write has them."""
        found: dict[str, list[dict]] = {}
        if at is None:
            for alert in self.get("/api/v1/alerts")["alerts"]:
                if alert["state"] == "firing":
                    found.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
            return found
        query = 'ALERTS{alertstate="firing"}'
        for series in self.get("/api/v1/query", query=query, time=str(at))["result"]:
            labels = {
                k: v for k, v in series["metric"].items() if k not in ("__name__", "alertstate")
            }
            found.setdefault(labels["alertname"], []).append(labels)
        return found

    def value(self, query: str, at: float | None = None) -> float:
        """``query``'s value now, or at the time ``at`` (seconds since the epoch)."""
        moment = {} if at is None else {"time": str(at)}
        result = self.get("/api/v1/query", query=query, **moment)["result"]
        return float(result[0]["value"][1]) if result else 0.0

    def scraped(self, job: str, after: float, timeout: float = 30) -> float:
        """When the last scrape of ``job`` was that succeeded, as the one before it did, once
        one after ``after`` (seconds since the epoch) has: a query at that time reads that
        scrape's samples, and alerts evaluated on the one before, whatever the scrapes after
        did (a failed one, a second's timeout on a busy machine, leaves every series stale from
        its own time on, and the alerts on them resolved)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.get("/api/v1/query", query=f'up{{job="{job}"}}[30s]')["result"]
            ups = [(float(t), v) for r in result for t, v in r["values"]]
            good = [t for (_, before), (t, v) in itertools.pairwise(ups) if before == v == "1"]
            if good and max(good) > after:
                return max(good)
            assert time.monotonic() < deadline, f"no two scrapes of {job} succeeded after {after}"
            time.sleep(0.2)

    def up(self) -> float | None:
        """``up`` now, None until Prometheus answers."""
        with contextlib.suppress(OSError):
            return self.value("up")
        return None

    def note_alerts(self, seen: dict[str, set[str]]) -> None:
        """Every alert's state now, added to ``seen`` (state: alert names)."""
        with contextlib.suppress(OSError):
            for alert in self.get("/api/v1/alerts")["alerts"]:
                seen.setdefault(alert["state"], set()).add(alert["labels"]["alertname"])

    def rest(self) -> None:
        """From now on it scrapes nothing and evaluates no rule, and answers queries on what it
        holds: it costs the other tests no CPU, and no alert fires after the scenario."""
        self.config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1m"}}))
        self.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while "rule_files" in self.get("/api/v1/status/config")["yaml"]:
            assert time.monotonic() < deadline, "Prometheus did not reload its configuration"
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()


class Webhook:
    """A webhook receiver on 127.0.0.1 and a free port: every notification POSTed to it, with
    the path it came to (``/page``, ``/ticket``), in :attr:`received`."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def alerts(self, path: str) -> list[dict]:
        """The alerts of every notification received on ``path``."""
        return [
            alert for got, note in list(self.received) if got == path for alert in note["alerts"]
        ]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Alertmanager:
    """An Alertmanager of the test's own: its folder (configuration, data), 127.0.0.1 and a
    free port, no cluster, configured by ``config`` (a parsed alertmanager.yml)."""

    def __init__(self, folder: Path, config: dict) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        (folder / "alertmanager.yml").write_text(yaml.safe_dump(config))
        self.log = open(folder / "alertmanager.log", "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [
                tool("alertmanager", "prometheus-alertmanager"),
                f"--config.file={folder / 'alertmanager.yml'}",
                f"--storage.path={folder / 'data'}",
                f"--web.listen-address={self.address}", "--cluster.listen-address=",
                "--log.level=warn",
            ],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def ready(self, timeout: float = 30) -> None:
        """Wait until it answers ``/-/ready``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.address}/-/ready", timeout=2):
                    return
            except OSError:
                assert self.process.poll() is None, "alertmanager ended: see alertmanager.log"
                assert time.monotonic() < deadline, "alertmanager is not ready"
                time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()


def watch_the_day_sample(spark: Any, folder: Path) -> Any:
    """A monitor with ``/metrics`` on a free port of 127.0.0.1, judging the day sample as it
    lands in ``folder/landing`` in six files a second apart (its inventory reuses ids, so
    different messages collide), alerts in ``folder/alerts.jsonl``."""
    from dedup_lib import DedupPolicy, sample_path
    from dedup_lib.live.landing.feed import land_in_steps
    from dedup_lib.live.options import ReadOptions, ServeOptions, WatchOptions, WriteOptions
    from dedup_lib.live.watch import watch_duplicates

    land_in_steps(sample_path("day.parquet"), str(folder / "landing"), files=6, every=1.0)
    options = WatchOptions(
        reading=ReadOptions(trigger=0.5),
        writing=WriteOptions(alerts=str(folder / "alerts.jsonl")),
        serving=ServeOptions(metrics="127.0.0.1:0"),
    )
    return watch_duplicates(
        spark, str(folder / "landing"), DedupPolicy("PT10M"), "PT1M", out=str(folder / "out"),
        checkpoint=str(folder / "ck"), options=options,
    )  # fmt: skip


def wait_for_the_collision_page(prometheus: Prometheus, watch: Any) -> dict[str, list[dict]]:
    """Wait until ``watch`` (:func:`watch_the_day_sample`) has read the whole day sample and
    Prometheus fires ``DedupCollision``; what fires then."""
    import pyarrow.parquet as pq

    from dedup_lib import sample_path

    total = pq.read_metadata(sample_path("day.parquet")).num_rows
    deadline = time.monotonic() + 180
    firing: dict[str, list[dict]] = {}
    while "DedupCollision" not in firing or watch.loaded["read"] < total:
        assert time.monotonic() < deadline, (firing, watch.loaded)
        assert watch.active, watch.error
        time.sleep(1)
        try:
            firing = prometheus.firing()
        except OSError:
            continue
    return firing


def shipped_alertmanager() -> dict:
    """The Alertmanager configuration the package ships, parsed."""
    config: dict = yaml.safe_load(ALERTMANAGER.read_text())
    return config


def for_test(url: str) -> dict:
    """The shipped Alertmanager configuration, each receiver's webhook calling
    ``url/<receiver>``, its first notification after a second (``group_wait``): nothing else
    changed."""
    config = shipped_alertmanager()
    for receiver in config["receivers"]:
        for hook in receiver["webhook_configs"]:
            hook["url"] = f"{url}/{receiver['name']}"
    config["route"]["group_wait"] = "1s"
    return config


@dataclass(frozen=True)
class PagedDay:
    """What :func:`page_the_day` leaves: the monitor (stopped), its folder, the Prometheus
    that scraped it (still running, its data to be queried at :attr:`ended`, the time of a
    scrape that succeeded after the last micro-batch's counts were served: the monitor is no
    longer scraped after it), what fired then, when it started, and the webhook's pages."""

    watch: Any
    folder: Path
    prometheus: Prometheus
    firing: dict[str, list[dict]]
    started: float
    ended: float
    webhook: Webhook

    @property
    def raised(self) -> list[dict]:
        """The alerts the monitor wrote to its alerts file."""
        text = (self.folder / "alerts.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines()]


@contextlib.contextmanager
def page_the_day(spark: Any, folder: Path) -> Iterator[PagedDay]:
    """The day sample judged by a monitor (:func:`watch_the_day_sample`) that a real
    Prometheus scrapes, evaluating the rules ``dedup-lib rules`` writes for :data:`JOB` and
    :data:`RUNBOOKS` and sending its alerts to a real Alertmanager configured from the shipped
    example (:func:`for_test`), which notifies a webhook: until the whole sample is read, the
    collision page has reached the webhook, and a few more scrapes (more than a rate interval)
    have passed. The monitor and Alertmanager are then stopped, and Prometheus rests
    (:meth:`Prometheus.rest`), answering queries until the block ends."""
    from dedup_lib.cli import main

    rules = folder / "dedup-rules.yml"
    assert main(["rules", "--job", JOB, "--runbook-url", RUNBOOKS, "--out", str(rules)]) == 0
    webhook = Webhook()
    (folder / "alertmanager").mkdir()
    alertmanager = Alertmanager(folder / "alertmanager", for_test(webhook.url))
    started = time.time()
    watch = watch_the_day_sample(spark, folder)
    host, port = watch.metrics_address
    (folder / "prometheus").mkdir()
    prometheus = Prometheus(
        folder / "prometheus", f"{host}:{port}", rules, job=JOB, alertmanager=alertmanager.address
    )
    try:
        alertmanager.ready()
        firing = wait_for_the_collision_page(prometheus, watch)
        deadline = time.monotonic() + 60
        while not webhook.alerts("/page"):
            assert time.monotonic() < deadline, (firing, watch.loaded)
            time.sleep(0.5)
        time.sleep(6)  # more scrapes than a rate interval after the last micro-batch
        ended = prometheus.scraped(JOB, after=time.time() - 1)
        firing = prometheus.firing(at=ended)
        watch.stop()
        alertmanager.stop()  # the webhook keeps what it was sent
        prometheus.rest()  # no page for the stopped monitor while later tests read it
        yield PagedDay(watch, folder, prometheus, firing, started, ended, webhook)
    finally:
        watch.stop()
        prometheus.stop()
        alertmanager.stop()
        webhook.stop()
