"""``dedup-lib rules``: the shipped rules for the user's scrape job and runbooks, as YAML that
``promtool check rules`` passes, the job selecting what it should (a promtool test on the
written rules), and a job or URL that could change what the rules say refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from dedup_lib.cli import main
from dedup_lib.cli import rules as command
from prometheus_kit import RULES, tool

#: A job name Prometheus allows, with what PromQL and YAML must escape.
ODD_JOB = 'dedup "live" \\ {prod} é'
#: The alerts that select by job, and nothing else does.
BY_JOB = {"DedupMonitorDown", "DedupMonitorRestarting", "DedupMonitorFlapping"}


def alerts(rules: dict) -> dict[str, dict]:
    return {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}


def written(tmp_path: Path, *options: str) -> dict:
    out = tmp_path / "rules.yml"
    assert main(["rules", *options, "--out", str(out)]) == 0
    promtool = tool("promtool")
    checked = subprocess.run(
        [promtool, "check", "rules", str(out)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules: dict = yaml.safe_load(out.read_text())
    return rules


def test_the_defaults_write_the_template(capsys):
    assert main(["rules"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(command.HEADER)
    assert yaml.safe_load(text) == yaml.safe_load(RULES.read_text())


def test_the_rules_name_the_job_and_link_the_runbooks(tmp_path, capsys):
    rules = written(tmp_path, "--job", ODD_JOB, "--runbook-url", "https://wiki.example.com/rb/")
    assert capsys.readouterr().out == (
        f"13 alerts for job 'dedup \"live\" \\ {{prod}} é' written to {tmp_path / 'rules.yml'}\n"
    )
    template = alerts(yaml.safe_load(RULES.read_text()))
    matcher = 'job="dedup \\"live\\" \\\\ {prod} é"'
    for name, rule in alerts(rules).items():
        assert rule["annotations"]["runbook_url"] == f"https://wiki.example.com/rb/{name}"
        assert (matcher in rule["expr"]) == (name in BY_JOB), name
        assert rule["expr"] == template[name]["expr"].replace(command.TEMPLATE_MATCHER, matcher)
        without = {k: v for k, v in rule["annotations"].items() if k != "runbook_url"}
        assert without == {
            k: v for k, v in template[name]["annotations"].items() if k != "runbook_url"
        }
        assert rule["labels"] == template[name]["labels"]


def test_the_written_rules_fire_for_the_job_they_name_only(tmp_path):
    """A promtool test of the written rules: a target of the job down pages, one of the
    template's job does not."""
    rules = written(tmp_path, "--job", ODD_JOB)
    assert rules
    down = {"series": f"up{{job={command.promql_string(ODD_JOB)}, instance='m:9464'}}"}
    other = {"series": "up{job='dedup-lib', instance='m:9464'}"}
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [{**down, "values": "0x5"}, {**other, "values": "0x5"}],
            "alert_rule_test": [{
                "eval_time": "4m",
                "alertname": "DedupMonitorDown",
                "exp_alerts": [{
                    "exp_labels": {"severity": "page", "job": ODD_JOB, "instance": "m:9464"},
                    "exp_annotations": {
                        "summary": "The live monitor does not answer at m:9464",
                        "description": "Prometheus cannot scrape it: it stopped, or its host did.",
                        "runbook_url": f"{command.DEFAULT_RUNBOOK_URL}/DedupMonitorDown",
                    },
                }],
            }],
        }],
    }  # fmt: skip
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, allow_unicode=True))
    tested = subprocess.run(
        [tool("promtool"), "test", "rules", "test.yml"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_out_replaces_a_file_whole(tmp_path):
    out = tmp_path / "prometheus" / "rules.yml"
    out.parent.mkdir()
    out.write_text("old")
    assert main(["rules", "--job", "dedup-watch", "--out", str(out)]) == 0
    assert 'up{job="dedup-watch"} == 0' in out.read_text()
    assert [p.name for p in out.parent.iterdir()] == ["rules.yml"]


@pytest.mark.parametrize(
    "job", ["", " dedup", "dedup ", "de\ndup", "de\x1b[2Jdup", "de\u202edup", "x" * 1025]
)
def test_a_job_that_is_no_label_value_is_refused(job, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["rules", "--job", job])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --job: expected a scrape job's name" in err
    assert "\x1b" not in err


@pytest.mark.parametrize(
    "url",
    [
        "wiki.example.com/runbooks",
        "ftp://wiki.example.com/runbooks",
        "javascript:alert(1)",
        "https:///runbooks",
        "https://wiki.example.com/runbooks?page=",
        "https://wiki.example.com/runbooks#",
        "https://wiki.example.com/{{ $labels.job }}",
        "https://wiki.example.com/run books",
        'https://wiki.example.com/"runbooks"',
        "https://wiki.example.com:0/runbooks",
        "https://wiki.example.com:port/runbooks",
    ],
)
def test_a_runbook_url_that_is_not_http_is_refused(url, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["rules", "--runbook-url", url])
    assert exited.value.code == 2
    assert "argument --runbook-url: expected an http(s) URL" in capsys.readouterr().err


def test_a_trailing_slash_is_one_slash():
    assert command.runbook_base("http://127.0.0.1:8000/docs/runbooks/") == (
        "http://127.0.0.1:8000/docs/runbooks"
    )
