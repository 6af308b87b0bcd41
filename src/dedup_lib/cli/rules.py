"""``dedup-lib rules``: the live monitor's Prometheus alerting rules, written for the user's
scrape job and runbooks.

The package ships the rules as a template (``resources/prometheus/dedup-rules.yml``): the job
``dedup-lib`` and the runbooks of the documentation site. The command reads it as YAML, sets
the job in the expressions that need it (``up`` and ``process_start_time_seconds``, which
every exporter has) and each alert's ``runbook_url`` to ``BASE/AlertName``, and writes it
back as YAML: the job is quoted as a PromQL string, the URL checked to be http(s) with only
the characters a URL has, so neither can change what the rules say. ``promtool check
rules`` passes the result (tests/cli/test_rules.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from dedup_lib.errors import excerpt, printable

#: The template's job, in the expressions that select by it.
TEMPLATE_JOB = "dedup-lib"
#: The label matcher that selects the template's job.
TEMPLATE_MATCHER = f'job="{TEMPLATE_JOB}"'
#: Where the template's alerts link their runbooks: the documentation site's runbooks folder
#: (docs/runbooks/, a page per alert), under a placeholder host (the ``.example`` domain is
#: reserved) until the site is served somewhere: ``--runbook-url`` says where.
DEFAULT_RUNBOOK_URL = "https://dedup-lib.example/runbooks"
#: What the written file starts with.
HEADER = (
    "# Alerting rules for the live monitor (dedup-lib watch --metrics HOST:PORT), written by\n"
    "# `dedup-lib rules` from the package's template (resources/prometheus/dedup-rules.yml):\n"
    "# each alert's runbook says what it means, what to check and how to tune it.\n"
)
#: The characters of a URL (RFC 3986: unreserved, reserved and ``%``): none of them starts
#: an annotation's template (``{{``), a quote or a space.
_URL_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%"
)


def template() -> dict[str, Any]:
    """The shipped rules, as YAML reads them."""
    path = resources.files("dedup_lib") / "resources" / "prometheus" / "dedup-rules.yml"
    rules: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return rules


def job_name(text: str) -> str:
    """A scrape job's name for ``--job``: a Prometheus label value (any Unicode text), not
    empty, without control characters or spaces around it (a typo, not a job)."""
    bad = not text or text != text.strip() or printable(text) != text or len(text) > 1024
    if bad:
        raise argparse.ArgumentTypeError(
            "expected a scrape job's name (printable text, no spaces around it, at most 1024 "
            f"characters), got {excerpt(text)}"
        )
    return text


def runbook_base(text: str) -> str:
    """A runbooks' base URL for ``--runbook-url``: ``http(s)://host/path``, without query or
    fragment (an alert's name follows it), with a URL's characters only; a trailing ``/``
    is dropped."""
    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, a bad IPv6 address
        ok = False
    ok = ok and "?" not in text and "#" not in text and set(text) <= _URL_CHARS
    if not ok:
        raise argparse.ArgumentTypeError(
            "expected an http(s) URL without ?query or #fragment, such as "
            f"https://wiki.example.com/runbooks, got {excerpt(text)}"
        )
    return text.rstrip("/")


def promql_string(text: str) -> str:
    """``text`` as a PromQL double-quoted string (Go's escapes: ``\\\\`` and ``\\"``; a
    job name has no control characters to escape)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rules_for(job: str, runbook_url: str) -> dict[str, Any]:
    """The shipped rules for scrape job ``job``, each alert's ``runbook_url`` being
    ``runbook_url/AlertName`` (both checked: :func:`job_name`, :func:`runbook_base`)."""
    job, base = job_name(job), runbook_base(runbook_url)
    rules = template()
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["expr"] = str(rule["expr"]).replace(TEMPLATE_MATCHER, f"job={promql_string(job)}")
            if "alert" in rule:
                rule.setdefault("annotations", {})["runbook_url"] = f"{base}/{rule['alert']}"
    return rules


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the longer expressions) as literal blocks, as the template has
    them."""


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _string)


def dump(rules: dict[str, Any]) -> str:
    """``rules`` as the YAML file Prometheus loads, after :data:`HEADER`."""
    body = yaml.dump(rules, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return HEADER + body


def write(text: str, out: Path) -> None:
    """``text`` into ``out`` whole or not at all (a Prometheus reloading meanwhile never
    reads half a file): written beside it, then renamed over it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def add_to(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``rules`` subcommand."""
    sub = commands.add_parser(
        "rules",
        help="write the live monitor's Prometheus alerting rules for your scrape job",
        description="Write the live monitor's Prometheus alerting rules (the package's "
        "template) for your scrape job, each alert's annotation runbook_url being "
        "RUNBOOK_URL/AlertName. Load the file with rule_files: in prometheus.yml.",
        epilog="example:\n  dedup-lib rules --job dedup-watch "
        "--runbook-url https://wiki.example.com/runbooks --out /etc/prometheus/dedup-rules.yml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument(
        "--job",
        type=job_name,
        default=TEMPLATE_JOB,
        help=f"the scrape job's job_name in prometheus.yml (default: {TEMPLATE_JOB})",
    )
    sub.add_argument(
        "--runbook-url",
        type=runbook_base,
        default=DEFAULT_RUNBOOK_URL,
        metavar="BASE",
        help="where the runbooks are, a page per alert named as the alert: "
        f"BASE/DedupCollision... (default: {DEFAULT_RUNBOOK_URL})",
    )
    sub.add_argument(
        "--out", type=Path, metavar="FILE", help="the file to write (replaced); default stdout"
    )
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    text = dump(rules_for(args.job, args.runbook_url))
    if args.out is None:
        sys.stdout.write(text)
    else:
        write(text, args.out)
        alerts = sum("alert" in r for g in yaml.safe_load(text)["groups"] for r in g["rules"])
        print(f"{alerts} alerts for job {excerpt(args.job)} written to {printable(str(args.out))}")
    return 0
