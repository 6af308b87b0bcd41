"""What ``dedup-lib watch`` prints as it runs, a line per event: as text for a terminal, or
with ``--log-format json`` one JSON object per line for journald, Loki or any log pipeline
(``time``, ``level``, ``event``, ``message`` and the event's fields). A failure prints its
traceback on stderr too, where a service manager's journal keeps it; so does the library's
warning (every command prints those as its :meth:`Journal.warning`)."""

from __future__ import annotations

import json
import sys
import traceback
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from dedup_lib.cli.terminal import Progress, print_note
from dedup_lib.errors import DedupLibError, printable

if TYPE_CHECKING:
    from dedup_lib.live.output.lines import BatchLine

#: The formats ``--log-format`` takes.
FORMATS = ("text", "json")


class Journal:
    """The lines of one run of ``watch``, in ``fmt`` (:data:`FORMATS`); progress steps
    left out when ``quiet``."""

    def __init__(self, fmt: str, quiet: bool) -> None:
        self.json = fmt == "json"
        self.progress = Progress(quiet)
        self.quiet = quiet

    def _emit(self, out: TextIO, level: str, event: str, message: str, **fields: Any) -> None:
        record = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "level": level,
            "event": event,
            "message": message,
            **fields,
        }
        print(json.dumps(record, default=str), file=out, flush=True)

    def step(self, text: str) -> None:
        """A step of the command (starting, serving, stopping), on stderr."""
        if not self.json:
            self.progress.step(text)
        elif not self.quiet:
            self._emit(sys.stderr, "info", "step", printable(text))

    def batch(self, line: BatchLine) -> None:
        """A micro-batch committed, on stdout."""
        if not self.json:
            print(line, flush=True)
            return
        self._emit(
            sys.stdout, "info", "micro_batch", str(line), stream=line.stream, batch=line.batch,
            judged=line.judged, duplicates=line.duplicates, late=line.late, alerts=line.alerts,
            state=vars(line.state),
        )  # fmt: skip

    def note(self, text: str) -> None:
        """What the folder holds that the monitor refuses or cannot read exactly."""
        if not self.json:
            print_note(text)
            return
        self._emit(sys.stdout, "warning", "note", printable(text))

    def warning(self, text: str) -> None:
        """What the library did that the user should know, though it went on (a
        :class:`dedup_lib.errors.DedupLibWarning`), on stderr."""
        if not self.json:
            print(printable(text), file=sys.stderr, flush=True)
            return
        self._emit(sys.stderr, "warning", "warning", printable(text))

    def summary(self, text: str) -> None:
        """The last line: what was read, and where the verdicts are."""
        if not self.json:
            print(text, flush=True)
            return
        self._emit(sys.stdout, "info", "summary", printable(text))

    def failed(self, line: str, exc: BaseException) -> None:
        """A failure: its one line (:func:`dedup_lib.cli.failures.error_line`) on stderr, and
        its traceback unless it is the library's own answer to input or a setting (a
        :class:`dedup_lib.errors.DedupLibError`, whose line says all)."""
        if isinstance(exc, DedupLibError):
            if self.json:
                self._emit(sys.stderr, "error", "failed", line)
            else:
                print(line, file=sys.stderr, flush=True)
            return
        trace = "\n".join(
            printable(row) for row in "".join(traceback.format_exception(exc)).splitlines()
        )
        if not self.json:
            print(trace, file=sys.stderr)
            print(line, file=sys.stderr, flush=True)
            return
        self._emit(sys.stderr, "error", "failed", line, traceback=trace)
