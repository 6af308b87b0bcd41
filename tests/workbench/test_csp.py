"""The report's Content-Security-Policy: the scripts the library wrote, by hash, nothing else."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from dedup_lib.workbench import csp

PAGE = """<!DOCTYPE html><html><head><title>t</title>
<script type="text/javascript">var a = 1;</script>
<script type="application/vnd.jupyter.widget-state+json">{"x": 1}</script>
<script type="module">import("x");</script>
<script src="local.js"></script>
</head><body><script>draw("<b>");</script></body></html>"""


def _hash(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def test_script_hashes_are_those_of_the_scripts_a_browser_runs():
    assert csp.script_hashes(PAGE) == [
        _hash("var a = 1;"),
        _hash('import("x");'),
        _hash('draw("<b>");'),
    ]


def test_the_policy_allows_those_scripts_only_and_fetches_nothing():
    policy = csp.policy([_hash("b"), _hash("a"), _hash("a")])
    assert policy.startswith("default-src 'none'; script-src 'sha256-")
    assert policy.count("sha256-") == 2
    assert "unsafe-inline" not in policy.split("style-src")[0]
    assert "base-uri 'none'" in policy
    assert "form-action 'none'" in policy


def test_with_policy_puts_it_first_in_the_head():
    page = csp.with_policy(PAGE, set(csp.script_hashes(PAGE)))
    head = page[page.index("<head>") :]
    assert re.match(r'<head>\n<meta http-equiv="Content-Security-Policy" content="[^"]+">', head)
    assert page.count("Content-Security-Policy") == 1


def test_a_script_the_library_did_not_write_is_refused():
    injected = PAGE.replace("</body>", "<script>alert('pwn')</script></body>")
    with pytest.raises(ValueError, match=r"runs 1 script\(s\) the library did not write"):
        csp.with_policy(injected, set(csp.script_hashes(PAGE)))
