"""The headless postmortem: papermill runs notebook 04, nbconvert writes one offline HTML.

What the report on the incident sample says is checked on the report the installed wheel
writes (``test_wheel.py`` with :func:`report_kit.check_incident_report`): one postmortem run
proves both that the wheel alone runs it and what it says."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dedup_lib import sample_path
from dedup_lib.cli import main


def test_postmortem_command_names_a_missing_input(capsys, tmp_path):
    assert main(["postmortem", str(tmp_path / "none.parquet"), "--quiet"]) == 1
    assert "does not exist" in capsys.readouterr().err
    sample = sample_path("incident.parquet")
    assert main(["postmortem", sample, "--kept", str(tmp_path / "none.json"), "--quiet"]) == 1
    assert "none.json does not exist" in capsys.readouterr().err


def test_the_postmortem_options_reach_the_notebook_as_its_parameters(tmp_path, monkeypatch):
    """``PostmortemOptions`` (and ``KeptExport``) reach the notebook as the parameters the
    command line's flags set: a notebook of two cells prints what it received."""
    import nbformat

    from dedup_lib import KeptExport, PostmortemOptions, run_postmortem

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sends.csv").write_text("Id,send_time\norder-1,2026-11-03T20:00:00Z\n")
    (tmp_path / "kept.json").write_text("[]")
    names = ["WINDOW", "ENTITY", "FORMAT", "MAPPING", "CONTENT", "KEPT_FORMAT", "KEPT_MAPPING"]
    parameters = nbformat.v4.new_code_cell(" = ".join([*names, "KEPT = None"]))
    parameters.metadata["tags"] = ["parameters"]
    shown = nbformat.v4.new_code_cell(
        "import os; print(repr((" + ", ".join(names) + ", os.path.basename(KEPT))))"
    )
    notebook = nbformat.v4.new_notebook(cells=[parameters, shown])
    notebook.metadata["language_info"] = {"name": "python"}
    nbformat.write(notebook, "tiny.ipynb")
    options = PostmortemOptions(
        format="csv",
        mapping={"Id": "message_id"},
        content=("payload_hash",),
        kept=KeptExport(tmp_path / "kept.json", "sb-explorer", {"Enqueued": "send_time"}),
    )
    report = run_postmortem(
        "sends.csv", window="PT1H", entity="orders", notebook=tmp_path / "tiny.ipynb",
        options=options,
    )  # fmt: skip
    said = (
        "('PT1H', 'orders', 'csv', {'Id': 'message_id'}, ['payload_hash'], 'sb-explorer', "
        "{'Enqueued': 'send_time'}, 'kept.json')"
    )
    assert said in html.unescape(report.read_text())


def test_the_export_s_options_reach_it_and_its_errors_name_them(tmp_path, monkeypatch, capsys):
    """``--kept-map`` reaches the export's ``KeptExport``; an error the notebook raises about
    the export, whose hint names the telemetry's ``--map``, names ``--kept-map`` too; one about
    the telemetry is left as it is; the export's options without ``--kept`` are refused."""
    from dedup_lib.cli import postmortem
    from dedup_lib.errors import InputError

    sample, kept = sample_path("incident.parquet"), tmp_path / "kept.csv"
    kept.write_text("Id,Enqueued\n")
    received = []

    def run(args, options):
        received.append(options.kept)
        path = options.kept.path if len(received) == 1 else sample
        hint = "(--map '<your column>=message_id' on the command line)"
        raise InputError(f"load_telemetry: {Path(path).resolve()} has no message_id column {hint}")

    monkeypatch.setattr(postmortem, "_run", run)
    argv = ["postmortem", sample, "--kept", str(kept), "--kept-map", "Enqueued=send_time", "-q"]
    assert main(argv) == 1
    assert received[0].mapping == {"Enqueued": "send_time"}
    assert capsys.readouterr().err.strip().endswith("(KEPT's columns are mapped with --kept-map)")
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().endswith("on the command line)")
    assert main(["postmortem", sample, "--kept-map", "Enqueued=send_time", "-q"]) == 1
    assert "describe the export --kept names" in capsys.readouterr().err
    assert len(received) == 2


def test_sample_path_lists_the_samples():
    with pytest.raises(FileNotFoundError, match=r"incident\.parquet"):
        sample_path("nope.parquet")


class _Elements(HTMLParser):
    """Every element of a page with its attributes, the page's text, and its CSP."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.spark  # starts Spark in a child process
def test_hostile_ids_entity_and_file_names_stay_text_in_the_report(hostile_report):
    from dedup_lib.workbench import csp
    from hostile_kit import IMG, SCRIPT

    html = hostile_report.read_text()
    page = _Elements()
    page.feed(html)
    made = [
        (tag, attrs)
        for tag, attrs in page.elements
        if "data-pwn" in attrs or any(k.startswith("on") and "pwn" in v for k, v in attrs.items())
    ]
    assert made == []  # no element and no handler came from the data...
    text = "".join(page.text)
    assert IMG in text  # ...which shows as its characters: the entity
    assert SCRIPT in text  # another entity, in the tables
    assert "'pwn-file')&gt; sends.parquet" in html  # the file name, in the input's table
    # the report runs only the scripts the library wrote (and says so to the browser)
    policies = [
        a["content"] for t, a in page.elements if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert len(policies) == 1
    assert all(h in policies[0] for h in csp.script_hashes(html))
    assert page.elements.index(
        ("meta", {"http-equiv": "Content-Security-Policy", "content": policies[0]})
    ) < min(i for i, (tag, _) in enumerate(page.elements) if tag == "script")
    assert "Traceback" not in html
