"""A hostile corpus: telemetry whose text an attacker chose, and what a page must not do with it.

Any application allowed to send to a queue chooses its MessageIds, partition keys and session
ids, and often the entity and file names reach the workbench from the same place. The corpus
is the incident sample (and its export of what the broker kept of ``orders``) with markup,
a right-to-left override and a 10 kB value in the entity names, MessageIds, partition keys,
session ids, sender and cause columns, and in the file names. The same value maps to the
same hostile value everywhere, so the replay's verdicts are those of the sample.

Every payload carries ``data-pwn`` (or ``pwn`` in its handler), so :data:`INERT_JS` can tell an
element or attribute made from the data from the page's own; :func:`watch` records what the
data may never cause: a dialog, a navigation, a console error.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

from dedup_lib import sample_path

SCRIPT = "<script data-pwn>alert('pwn-script')</script>"
IMG = "<img src=x data-pwn onerror=alert('pwn-img')>"
SVG = "<svg data-pwn onload=alert('pwn-svg')>"
LINK = "<a data-pwn href=\"javascript:alert('pwn-link')\">open</a>"
BREAKOUT = '"><b data-pwn>x'
RTL = "\u202egnp.exe"
LONG = "L" * 10_240
#: What the MessageIds, partition keys and session ids are prefixed with (one per value, by
#: its hash, so equal values stay equal).
PREFIXES = (SCRIPT, IMG, SVG, LINK, BREAKOUT, RTL)

#: The entities: each of the sample's, renamed. ``orders`` keeps its export (the kept file is
#: named after it, so its name is a file name: no ``/``); a tenth of ``notifications`` goes to
#: an entity of the breakout, a fiftieth to one of 10 kB.
ENTITIES = {"orders": IMG, "payments": SCRIPT, "notifications": LINK}
SENDERS = {"orders-api": SVG, "payments-svc": RTL, "notifier": BREAKOUT, "shipping-svc": SCRIPT}
CAUSES = {"restart_resend": "<svg data-pwn onload=alert('pwn-cause')>"}
#: Every hostile entity, as a user picks it in the explorer.
HOSTILE_ENTITIES = (IMG, SCRIPT, LINK, BREAKOUT, LONG)

#: File names: the sends and the kept export (named after its entity, as Service Bus Explorer
#: users name them; the entity comes from the name). No ``:`` (Hadoop refuses it) or ``/``.
SENDS_NAME = "\"><img src=x data-pwn onerror=alert('pwn-file')> sends.parquet"
KEPT_NAME = f"{IMG}.json.gz"


def _prefixed(value: Any) -> Any:
    if not isinstance(value, str) or not value:
        return value
    crc = zlib.crc32(value.encode())
    prefix = LONG if crc % 97 == 0 else PREFIXES[crc % len(PREFIXES)]
    return prefix + value


def _entity(row: pd.Series) -> str:
    if row["entity"] == "notifications" and row["logical_id"] % 50 == 0:
        return LONG
    if row["entity"] == "notifications" and row["logical_id"] % 10 == 0:
        return BREAKOUT
    return ENTITIES[row["entity"]]


@dataclass(frozen=True)
class Corpus:
    """The hostile sends and kept export, written under ``folder``."""

    folder: Path
    sends: Path = field(init=False)
    kept: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sends", self.folder / SENDS_NAME)
        object.__setattr__(self, "kept", self.folder / KEPT_NAME)


def write_corpus(folder: Path) -> Corpus:
    """Write the hostile sends (Parquet, as pandas writes it by default: nanosecond times, so
    the load's note names the hostile file too) and the kept export (Service Bus Explorer
    JSON)."""
    corpus = Corpus(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sends = pd.read_parquet(sample_path("incident.parquet"))
    sends["entity"] = sends.apply(_entity, axis=1)
    for column in ("message_id", "partition_key", "session_id"):
        sends[column] = sends[column].map(_prefixed)
    sends["sender"] = sends["sender"].map(SENDERS)
    sends["cause"] = sends["cause"].map(lambda c: CAUSES.get(c, c))
    sends.to_parquet(corpus.sends, index=False)
    with gzip.open(sample_path("incident-kept/orders.json.gz"), "rt") as source:
        kept = json.load(source)
    for message in kept:
        for key in ("messageId", "partitionKey", "sessionId"):
            message[key] = _prefixed(message[key])
    with gzip.open(corpus.kept, "wt") as out:
        json.dump(kept, out)
    return corpus


#: What the data made of the page: elements carrying a payload's marker, event handlers with
#: a payload's code, ``javascript:`` links, markup plotly.js was given to read (it makes its
#: own elements of it, without the marker), bidirectional overrides and 10 kB runs in the
#: text. Shadow roots and same-origin frames are searched too.
INERT_JS = r"""() => {
    const found = [];
    const describe = el => el.outerHTML.slice(0, 160);
    const visit = root => {
        for (const el of root.querySelectorAll('*')) {
            if (el.hasAttribute('data-pwn')) found.push('element from the data: ' + describe(el));
            for (const a of el.attributes) {
                if (/^on/i.test(a.name) && /pwn/.test(a.value)) {
                    found.push('handler from the data: ' + describe(el));
                }
                if (/href$|^src$|^action$/i.test(a.name) && /^\s*javascript:/i.test(a.value)) {
                    found.push('javascript: link: ' + describe(el));
                }
            }
            if (el.shadowRoot) visit(el.shadowRoot);
            if (el.tagName === 'IFRAME') {
                try { if (el.contentDocument) visit(el.contentDocument); } catch (e) {}
            }
        }
        // plotly.js keeps each text it drew as given: markup there (but its line break) was
        // read as plotly's own (<a href>, <b>), even where it made no element of the data's
        for (const el of root.querySelectorAll('[data-unformatted]')) {
            const given = el.getAttribute('data-unformatted').replace(/<br>/gi, ' ');
            if (/<[a-z\/!]/i.test(given)) found.push('plotly given markup: ' + given.slice(0, 99));
        }
        const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const text = node.textContent;
            if (/[\u202a-\u202e\u2066-\u2069]/.test(text)) {
                found.push('a bidirectional override drawn: ' + JSON.stringify(text.slice(0, 80)));
            }
            if (/L{1000}/.test(text)) found.push('a 10 kB value drawn whole');
        }
    };
    visit(document);
    return found;
}"""


@dataclass
class Watch:
    """What a page did that data may never make it do."""

    dialogs: list[str] = field(default_factory=list)
    navigations: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def problems(self, page: Any) -> list[str]:
        """Everything wrong so far, the page's elements included."""
        return [
            *(f"dialog: {d}" for d in self.dialogs),
            *(f"navigation to {n}" for n in self.navigations),
            *self.console,
            *page.evaluate(INERT_JS),
        ]


def watch(page: Any, *, ignore: Any = None, console: bool = True) -> Watch:
    """Record ``page``'s dialogs (dismissed), console errors (unless not ``console``; but
    those ``ignore``, a compiled pattern, matches) and navigations away from the page it first
    loaded: to another origin, or any at all from a ``file:`` page (a single-page app changing
    its own path is not one)."""
    seen = Watch()
    first: list[str] = []

    def dialog(d: Any) -> None:
        seen.dialogs.append(f"{d.type}: {d.message}")
        d.dismiss()

    def navigated(frame: Any) -> None:
        if frame != page.main_frame or frame.url == "about:blank":
            return
        if not first:
            first.append(frame.url)
            return
        origin, now = urlsplit(first[0]), urlsplit(frame.url)
        if (now.scheme, now.netloc) != (origin.scheme, origin.netloc) or (
            origin.scheme == "file" and frame.url != first[0]
        ):
            seen.navigations.append(frame.url)

    def logged(message: Any) -> None:
        if message.type == "error" and not (ignore and ignore.search(message.text)):
            seen.console.append(f"console error: {message.text[:300]}")

    page.on("dialog", dialog)
    if console:
        page.on("console", logged)
        page.on("pageerror", lambda error: seen.console.append(f"page error: {error}"))
    page.on("framenavigated", navigated)
    return seen
