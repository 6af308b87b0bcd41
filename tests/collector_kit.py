"""The OpenTelemetry Collector's ``file`` exporter with ``rotation``, as its Go code writes
files (there is no Collector binary here): each export is one JSON line written through a
``bufio.Writer`` of 4 KiB (``exporter/fileexporter/buffered_writer.go``, ``file_writer.go``:
the line, then a newline) into a ``lumberjack.Logger``, flushed every ``flush_interval``.

lumberjack (gopkg.in/natefinch/lumberjack.v2) rotates before a write that would take the
file past ``max_megabytes``: it renames the file to ``<prefix>-<UTC time>.<ext>``
(``2006-01-02T15-04-05.000``), starts the file again and removes the oldest backups past
``max_backups``. The buffer hands it 4 KiB pieces of a long line, so a rotation can fall
inside a line: the backup ends with its start and the new file begins with its rest. A file
found at start is appended to, unless it is full.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

BUFFER = 4096


class Lumberjack:
    """lumberjack.Logger: a file at ``path`` rotated past ``max_bytes``."""

    def __init__(
        self, path: str, max_bytes: int, max_backups: int, clock: Callable[[], datetime]
    ) -> None:
        self.path, self.max_bytes, self.max_backups = path, max_bytes, max_backups
        self.clock = clock
        self.file = None
        self.size = 0

    def write(self, data: bytes) -> None:
        if len(data) > self.max_bytes:
            raise ValueError("write length exceeds maximum file size")
        if self.file is None:
            self._open_existing_or_new(len(data))
        if self.size + len(data) > self.max_bytes:
            self._rotate()
        self.file.write(data)
        self.file.flush()  # a Go os.File writes through: no buffer of its own
        self.size += len(data)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def _open_existing_or_new(self, length: int) -> None:
        if not os.path.exists(self.path):
            self._open_new()
        elif os.path.getsize(self.path) + length >= self.max_bytes:
            self._rotate()
        else:
            self.file = open(self.path, "ab")  # noqa: SIM115
            self.size = os.path.getsize(self.path)

    def _rotate(self) -> None:
        self.close()
        self._open_new()
        self._mill()

    def _open_new(self) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, self.backup_name())
        self.file = open(self.path, "wb")  # noqa: SIM115
        self.size = 0

    def backup_name(self) -> str:
        folder, name = os.path.split(self.path)
        stem, ext = os.path.splitext(name)
        at = self.clock().astimezone(UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3]
        return os.path.join(folder, f"{stem}-{at}{ext}")

    def _mill(self) -> None:
        folder, name = os.path.split(self.path)
        stem, ext = os.path.splitext(name)
        backups = sorted(
            n
            for n in os.listdir(folder)
            if n.startswith(stem + "-") and n.endswith(ext) and n != name
        )
        for old in backups[: max(0, len(backups) - self.max_backups)]:
            os.remove(os.path.join(folder, old))


class Collector:
    """The file exporter: :meth:`export` a line, :meth:`flush` (every ``flush_interval``),
    :meth:`close` (a shutdown flushes what is buffered)."""

    def __init__(
        self,
        path: str,
        max_bytes: int = 100 << 20,
        max_backups: int = 100,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.file = Lumberjack(path, max_bytes, max_backups, clock or _ticking())
        self.buffer = bytearray()

    def export(self, line: bytes) -> None:
        self._write(line)
        self._write(b"\n")

    def _write(self, data: bytes) -> None:
        # bufio.Writer.Write: fill the buffer and flush it while the rest does not fit; a
        # write larger than an empty buffer goes straight through.
        while len(data) > BUFFER - len(self.buffer):
            if not self.buffer:
                self.file.write(bytes(data))
                return
            room = BUFFER - len(self.buffer)
            self.buffer += data[:room]
            data = data[room:]
            self.flush()
        self.buffer += data

    def flush(self) -> None:
        if self.buffer:
            self.file.write(bytes(self.buffer))
            self.buffer.clear()

    def close(self) -> None:
        self.flush()
        self.file.close()


def _ticking() -> Callable[[], datetime]:
    """A clock that moves a millisecond at each reading, so two rotations never share a
    backup name (as they would within a millisecond of the Collector's own clock)."""
    now = [datetime(2026, 12, 1, 19, 33, tzinfo=UTC)]

    def clock() -> datetime:
        now[0] += timedelta(milliseconds=1)
        return now[0]

    return clock
