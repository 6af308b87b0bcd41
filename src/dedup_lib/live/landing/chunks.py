"""A micro-batch's chunks written as files of their own, for Spark to read: the bytes the
ledger planned, copied out of the landing folder before the plan is recorded. So a
micro-batch done again after a crash reads exactly what it read the first time, whatever
the writer did to the folder since, and Spark never reads a file while it is written."""

from __future__ import annotations

import os
from typing import BinaryIO

from dedup_lib.live.durable import remove, replace_with
from dedup_lib.live.landing.ledger import Chunk, MovedError, Piece, open_file

__all__ = ["MovedError", "chunk_path", "remove_chunks", "write_chunks"]


def chunk_path(folder: str, seq: int, chunk: Chunk) -> str:
    """Where chunk ``seq`` of a micro-batch lies: named in the order the ledger planned."""
    return os.path.join(folder, f"chunk-{seq:06d}{chunk.suffix}")


def write_chunks(folder: str, chunks: list[Chunk]) -> list[str]:
    """Each chunk as a file in ``folder``, whole or not at all; their paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for seq, chunk in enumerate(chunks):
        path = chunk_path(folder, seq, chunk)
        if not (chunk.whole and _linked(chunk.pieces[0], path)):
            replace_with(path, lambda target, chunk=chunk: _copy(chunk, target))  # type: ignore[misc]
        paths.append(path)
    return paths


def _linked(piece: Piece, path: str) -> bool:
    """A finished file linked, not copied (on the same file system): it is never written
    again, and one that is changed after all is refused (:mod:`dedup_lib.live.landing.ledger`)."""
    with _opened(piece) as source:
        found = source.name
        if os.fstat(source.fileno()).st_size != piece.end:
            raise MovedError(f"{piece.path} changed between planning and reading")
    remove(path)
    try:
        os.link(found, path)
    except OSError:
        return False
    return True


def remove_chunks(folder: str) -> None:
    """A committed micro-batch's chunks, no longer needed."""
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            remove(os.path.join(folder, name))
        os.rmdir(folder)


def _copy(chunk: Chunk, target: str) -> None:
    with open(target, "wb") as out:
        for piece in chunk.pieces:
            with _opened(piece) as source:
                source.seek(piece.start)
                left = piece.end - piece.start
                while left:
                    data = source.read(min(left, 1 << 22))
                    if not data:
                        raise MovedError(f"{piece.path} ended before byte {piece.end}")
                    out.write(data)
                    left -= len(data)


def _opened(piece: Piece) -> BinaryIO:
    """The planned file, found by its identity wherever a rotation has moved it since."""
    return open_file(piece.path, piece.file, in_folder=True)
