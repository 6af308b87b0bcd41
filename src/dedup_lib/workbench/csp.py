"""A Content-Security-Policy for a page written once and opened from disk (the postmortem
report): only the scripts the library itself wrote may run.

Escaping (:func:`dedup_lib.text.escape`) keeps markup in the data from becoming elements; the
policy is the second line, should a surface ever forget it. Each script the library writes
(a chart, plotly.js, the HTML template's own) is known by its SHA-256 when it is written,
and the policy allows those hashes only: an injected ``<script>`` or an ``onerror=`` handler
does not run (a page's hashes turn inline handlers off), and no request leaves the page.
"""

from __future__ import annotations

import base64
import hashlib
from html.parser import HTMLParser

__all__ = ["META", "policy", "script_hashes", "with_policy"]

#: Script types a browser runs; others (``application/json``, MathJax's configuration) are data.
EXECUTABLE = frozenset({"", "text/javascript", "application/javascript", "module"})
#: The output metadata key a cell lists the hashes of the scripts it wrote under.
META = "scripts"


class _Scripts(HTMLParser):
    """The text of each inline script a browser would run, in page order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.found: list[str] = []
        self._open: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "script":
            return
        named = {k: (v or "") for k, v in attrs}
        if "src" not in named and named.get("type", "").strip().lower() in EXECUTABLE:
            self._open = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._open is not None:
            self.found.append("".join(self._open))
            self._open = None


def script_hashes(page: str) -> list[str]:
    """The CSP source (``'sha256-...'``) of each inline script of ``page`` a browser runs."""
    parser = _Scripts()
    parser.feed(page)
    parser.close()
    return [_source(text) for text in parser.found]


def _source(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def policy(hashes: list[str]) -> str:
    """The policy: these scripts, inline styles (plotly sets them), images and fonts inlined
    as ``data:``; nothing fetched, no form sent, no base URL changed."""
    scripts = " ".join(sorted(set(hashes))) or "'none'"
    return (
        f"default-src 'none'; script-src {scripts}; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:; base-uri 'none'; form-action 'none'"
    )


def with_policy(page: str, allowed: set[str]) -> str:
    """``page`` with its policy first in its ``<head>``, allowing the ``allowed`` hashes.
    Raises ``ValueError`` naming a script the page runs that is not among them."""
    found = script_hashes(page)
    unknown = [h for h in found if h not in allowed]
    if unknown:
        raise ValueError(
            f"the page runs {len(unknown)} script(s) the library did not write: {unknown[0]}"
        )
    head = page.find("<head>")
    if head < 0:
        raise ValueError("the page has no <head> to put its Content-Security-Policy in")
    meta = f'<meta http-equiv="Content-Security-Policy" content="{policy(found)}">'
    at = head + len("<head>")
    return page[:at] + "\n" + meta + page[at:]
