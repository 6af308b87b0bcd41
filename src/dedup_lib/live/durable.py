"""Files the live monitor writes whole or not at all: written under a temporary name, flushed
to the disk, then renamed over the target, so a crash at any instant leaves either the old
file or the new one, never a part."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa


def replace_with(path: str, write: Callable[[str], None]) -> None:
    """Write ``path`` through ``write(temporary_path)``, then put it in place at once."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    partial = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.part")
    try:
        write(partial)
        _flush(partial)
        os.replace(partial, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
    _flush_folder(folder)


def write_json(path: str, data: Any) -> None:
    """``data`` as JSON at ``path``, whole or not at all."""

    def write(target: str) -> None:
        with open(target, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False, default=str)

    replace_with(path, write)


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def write_arrow(path: str, table: pa.Table) -> None:
    """``table`` as an Arrow IPC file at ``path``, whole or not at all."""

    def write(target: str) -> None:
        with pa.OSFile(target, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)

    replace_with(path, write)


def read_arrow(path: str, *, mapped: bool = False) -> pa.Table:
    """The Arrow IPC file at ``path``; ``mapped`` reads it through a memory map, which the
    table's buffers keep open as long as they live."""
    if mapped:
        return pa.ipc.open_file(pa.memory_map(path)).read_all()
    with pa.OSFile(path, "rb") as source:
        return pa.ipc.open_file(source).read_all()


def numbered(folder: str, prefix: str, suffix: str) -> Iterator[tuple[int, str]]:
    """The files ``prefix`` + number + ``suffix`` in ``folder``, by number."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return iter(())
    found = []
    for name in names:
        middle = name[len(prefix) : len(name) - len(suffix)]
        if name.startswith(prefix) and name.endswith(suffix) and middle.isdigit():
            found.append((int(middle), os.path.join(folder, name)))
    return iter(sorted(found))


def remove(path: str) -> None:
    """Remove a file that may be gone already."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _flush(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _flush_folder(folder: str) -> None:
    """The rename itself made durable (a folder's entries are flushed with the folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
