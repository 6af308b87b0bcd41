"""The landing folder's ledger: which bytes of which file the monitor has taken, so that each
record of a file is read once, whole, however the file arrived (docs/rules.md, section 8).

A file is known by its device and inode (a rename keeps them) and by a hash of its first
bytes (an inode the system gives again to a new file has other first bytes). Each micro-batch
the folder is listed and the ledger plans what is new:

- **text files** (JSON Lines, OTLP traces, CSV) are taken record by record as they grow:
  up to their last whole record; a last record without its newline is taken once the file
  has not changed for ``settle`` (a writer that ends without one). A rotated stream's backup
  that ends inside a record is read on into the next file of its stream
  (:mod:`dedup_lib.live.landing.rotation`), so the record is read whole, once;
- **Parquet and compressed files** are taken whole once finished (:func:`records.finished`:
  a footer that reads, a stream that ends). A stream's active file is never read while it
  is written (before its first rotation it cannot be told apart: ``exclude`` names it). One
  that changes after it was read is said in a note, once: it cannot be read exactly.

A file that goes before it was read whole is said in a note with the bytes never read;
while a listing misses such a file (a rename under way) nothing is planned, ``settle`` at
most. A backup's unended last record waits for the file after it, whatever the time.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace
from typing import BinaryIO, NamedTuple

import xxhash

from dedup_lib.errors import printable
from dedup_lib.live.landing.records import codec_of, finished, first_end, records_end
from dedup_lib.live.landing.rotation import is_active, member_of, streams

#: How many first bytes tell a file from another that took its inode.
HEAD = 4096
#: About how many bytes of text a byte of Parquet or of compressed text holds.
_PACKED = 5


@dataclass(frozen=True)
class Seen:
    """What the ledger knows of a file: where and how large it was last seen, the bytes
    taken (a whole file's size once read), its header (CSV) and its first bytes' hash."""

    name: str
    size: int
    mtime_ns: int
    taken: int = 0
    whole: bool = False
    header: int = 0
    head: str = ""
    head_len: int = 0
    #: A last record without its newline was taken (after ``settle``).
    cut: bool = False
    said: tuple[str, ...] = ()
    #: When a listing first missed it (0: the last one had it).
    missing: float = 0.0
    #: Since when bytes of it wait to be read (0: none wait), and whether it is a stream's
    #: active file that is read only once rotated (its bytes wait by design).
    unread_since: float = 0.0
    active: bool = False

    @property
    def read_all(self) -> bool:
        return self.taken >= self.size


@dataclass(frozen=True)
class Piece:
    """Bytes ``start`` to ``end`` of the file known as ``file``, at ``path`` when planned."""

    file: str
    path: str
    start: int
    end: int


@dataclass(frozen=True)
class Chunk:
    """Records to read as one file: its pieces in order, named for the user by ``name``."""

    name: str
    pieces: tuple[Piece, ...]
    suffix: str
    #: A finished file read whole (Parquet, compressed): never written again.
    whole: bool = False

    @property
    def size(self) -> int:
        return sum(p.end - p.start for p in self.pieces)

    @property
    def weight(self) -> int:
        """What it counts against the budget: its bytes as text (Parquet and compression
        hold about five times as many records in a byte)."""
        return self.size * (_PACKED if self.whole else 1)


#: What a note says happened to the folder's data: a file removed before it was read whole
#: (its bytes lost), a text file rewritten in place (read again from its start), a Parquet or
#: compressed file changed after it was read (its change lost), a file not whole (not read
#: until it is). ``dedup_notes_total`` counts them by kind.
NOTE_KINDS = ("removed_unread", "rewritten", "changed_after_read", "unfinished")
#: The kinds that mean data the monitor never judges.
LOST = ("removed_unread", "rewritten", "changed_after_read")


class Note(NamedTuple):
    """A note about the folder: its kind (one of :data:`NOTE_KINDS`) and what it says."""

    kind: str
    text: str


@dataclass
class Plan:
    """One micro-batch's chunks, the ledger after it, and what to tell the user."""

    chunks: list[Chunk] = field(default_factory=list)
    files: dict[str, Seen] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    #: Whether the budget left new records for the next micro-batch.
    more: bool = False

    @property
    def backlog(self) -> tuple[int, float | None]:
        """The bytes landed and not read yet, and since when the oldest of them wait."""
        waiting = [s for s in self.files.values() if s.unread_since]
        left = sum(max(0, s.size - s.taken) for s in waiting)
        return left, min((s.unread_since for s in waiting), default=None)

    @property
    def landed(self) -> float | None:
        """When bytes last landed: the newest modification of a file the folder holds (Unix
        time; None: it holds none)."""
        newest = max((s.mtime_ns for s in self.files.values() if not s.missing), default=None)
        return None if newest is None else newest / 1e9


@dataclass(frozen=True)
class Reading:
    """How the folder's files are read: ``fmt`` (parquet, csv, json, otlp), ``settle``
    (seconds a text file must stay unchanged for a last record without its newline to
    count as whole),
    ``budget`` (bytes of text per micro-batch, about a million sends; a larger file read
    whole goes alone), ``exclude`` (glob
    patterns of names never read)."""

    fmt: str
    settle: float = 5.0
    budget: int = 256 << 20
    exclude: tuple[str, ...] = ()

    @property
    def csv(self) -> bool:
        return self.fmt == "csv"

    def whole(self, name: str) -> bool:
        return self.fmt == "parquet" or codec_of(name) is not None


def file_id(stat: os.stat_result) -> str:
    return f"{stat.st_dev}:{stat.st_ino}"


def listed(folder: str, reading: Reading) -> dict[str, os.stat_result]:
    """The folder's files (not hidden or bookkeeping names, not excluded), by name."""
    found = {}
    for entry in os.scandir(folder):
        name = entry.name
        if name.startswith((".", "_")) or name.endswith(".crc"):
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in reading.exclude):
            continue
        try:
            if entry.is_file():
                found[name] = entry.stat()
        except FileNotFoundError:
            continue
    return found


def plan(folder: str, known: dict[str, Seen], reading: Reading, now: float) -> Plan:
    """What is new in ``folder`` since the ledger ``known``, within the budget."""
    found = listed(folder, reading)
    result = Plan(files={})
    ids = {file_id(st): name for name, st in found.items()}
    unsure = False
    for fid, seen in known.items():
        if fid in ids:
            result.files[fid] = replace(seen, missing=0.0)
        elif seen.read_all:
            continue
        elif not seen.missing or now - seen.missing < reading.settle:
            # A listing that meets a rename (a rotation) may miss both names for a moment.
            result.files[fid] = replace(seen, missing=seen.missing or now)
            unsure = True
        else:
            result.notes.append(_removed(seen))
    if unsure:
        return result
    listed_files, said = dict(result.files), list(result.notes)
    try:
        _fill(folder, found, result, reading, now)
    except MovedError:
        # A name listed now holds another file (a rotation since): plan again from a new
        # listing, never with bytes or a head read from the wrong file.
        return _aged(Plan(files=listed_files, notes=said), now)
    return _aged(result, now)


def _fill(
    folder: str, found: dict[str, os.stat_result], result: Plan, reading: Reading, now: float
) -> None:
    """The plan's chunks, stream by stream, until the budget."""
    spent = 0
    for group in streams(sorted(found)):
        for chunk, taken in _group(folder, group, found, result, reading, now):
            if result.chunks and spent + chunk.weight > reading.budget:
                result.more = True
                return
            result.chunks.append(chunk)
            result.files.update(taken)
            spent += chunk.weight


def _aged(result: Plan, now: float) -> Plan:
    """Each file's bytes left unread after the plan, dated from when they were first seen."""
    for fid, seen in result.files.items():
        waits = seen.size > seen.taken and not seen.active and "changed" not in seen.said
        since = (seen.unread_since or now) if waits else 0.0
        if since != seen.unread_since:
            result.files[fid] = replace(seen, unread_since=since)
    return result


#: A chunk, and the ledger's entries as they are once it is taken.
_Taken = tuple[Chunk, dict[str, Seen]]


def _group(
    folder: str,
    group: list[str],
    found: dict[str, os.stat_result],
    result: Plan,
    reading: Reading,
    now: float,
) -> Iterator[_Taken]:
    """The chunks of one stream (or one file), in order, each with the ledger's entries once
    it is taken: the caller stops at the budget, leaving the files as they were."""
    carry: tuple[str, Seen] | None = None
    for name in group:
        stat = found[name]
        fid = file_id(stat)
        path = os.path.join(folder, name)
        seen = _seen(path, name, stat, result, fid)
        if seen.whole:
            _whole_changed(fid, seen, stat, result)
            continue
        if reading.whole(name):
            active = is_active(name, group)
            if active != seen.active:
                result.files[fid] = seen = replace(seen, active=active)
            if not active:
                yield from _whole(path, fid, seen, stat, result, reading, now)
            continue
        if carry is not None:
            stitched = _stitch(carry, path, fid, seen)
            if stitched is None:
                return
            yield stitched
            seen = result.files[fid]
        later = name != group[-1] or member_of(name) is not None
        carry = yield from _text(path, fid, seen, stat, result, reading, now, later)


def _seen(path: str, name: str, stat: os.stat_result, result: Plan, fid: str) -> Seen:
    """The ledger's entry for the file: new if it is new, or if its first bytes are not
    those seen (a file rewritten in place, or a new one given a removed file's inode). A
    whole file read is left as it was read."""
    seen = result.files.get(fid)
    fresh = Seen(name, stat.st_size, stat.st_mtime_ns)
    if seen is None:
        seen = _with_head(path, fid, fresh)
    elif seen.whole:
        return seen
    elif (seen.size, seen.mtime_ns) != (stat.st_size, stat.st_mtime_ns) or seen.name != name:
        same = stat.st_size >= seen.head_len and _hash(path, fid, seen.head_len) == seen.head
        if not same or stat.st_size < seen.taken:
            if not seen.read_all:
                result.notes.append(_removed(seen))
            if seen.name == name:
                text = f"{printable(name)} was rewritten in place: read again from its start"
                result.notes.append(Note("rewritten", text))
            seen = _with_head(path, fid, fresh)
        else:
            seen = replace(seen, name=name, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
            if seen.head_len < HEAD and stat.st_size > seen.head_len:
                seen = _with_head(path, fid, seen)
    result.files[fid] = seen
    return seen


def _with_head(path: str, fid: str, seen: Seen) -> Seen:
    length = min(seen.size, HEAD)
    return replace(seen, head=_hash(path, fid, length), head_len=length)


def _hash(path: str, fid: str, length: int) -> str:
    with open_file(path, fid) as file:
        return xxhash.xxh64_hexdigest(file.read(length))


def _whole(
    path: str,
    fid: str,
    seen: Seen,
    stat: os.stat_result,
    result: Plan,
    reading: Reading,
    now: float,
) -> Iterator[_Taken]:
    """A Parquet or compressed file, whole, once it is finished."""
    quiet = now - stat.st_mtime_ns / 1e9
    if not finished(path, reading.fmt == "parquet"):
        if quiet >= 6 * reading.settle:
            note = (
                f"{printable(seen.name)} is not a whole file (cut short?) and has not "
                f"changed for {quiet:.0f} s: not read until it does"
            )
            _say(result, fid, "unfinished", note)
        return
    piece = Piece(fid, path, 0, stat.st_size)
    chunk = Chunk(seen.name, (piece,), _suffix(seen.name, reading), whole=True)
    yield chunk, {fid: replace(seen, taken=stat.st_size, whole=True)}


def _whole_changed(fid: str, seen: Seen, stat: os.stat_result, result: Plan) -> None:
    """A file read whole that has changed since: said, once, and not read again."""
    if (seen.taken, seen.mtime_ns) != (stat.st_size, stat.st_mtime_ns):
        note = (
            f"{printable(seen.name)} changed after it was read whole: a Parquet or compressed "
            "file is read once, finished; land a new file instead (write it under a hidden "
            "name, then rename it)"
        )
        _say(result, fid, "changed", note)


def _text(
    path: str,
    fid: str,
    seen: Seen,
    stat: os.stat_result,
    result: Plan,
    reading: Reading,
    now: float,
    later: bool,
) -> Generator[_Taken, None, tuple[str, Seen] | None]:
    """A text file's whole records since the last taken; returns the file and its unended
    last record when a later file of its stream holds the rest of it."""
    header: tuple[Piece, ...] = ()
    if reading.csv:
        if not seen.header:
            end = _first(path, fid, 0, stat.st_size, True)
            if not end:
                return None
            seen = replace(seen, header=end, taken=max(seen.taken, end))
            result.files[fid] = seen
        header = (Piece(fid, path, 0, seen.header),)
    if seen.cut and stat.st_size > seen.taken:
        _say(
            result,
            fid,
            "cut",
            f"{printable(seen.name)} grew after its last line, which "
            "had no newline, was read: that line may have been cut; end every record "
            "with a newline",
        )
    start = seen.taken
    stop = min(stat.st_size, start + reading.budget)
    end = start + records_end(_read(path, fid, start, stop), reading.csv)
    suffix = _suffix(seen.name, reading)
    if end > start:
        seen = replace(seen, taken=end)
        yield Chunk(seen.name, (*header, Piece(fid, path, start, end)), suffix), {fid: seen}
    if stop < stat.st_size:
        result.more = True
        return None
    if end == stat.st_size:
        return None
    if later and not reading.csv:
        return (fid, seen)
    if now - stat.st_mtime_ns / 1e9 >= reading.settle:
        piece = Piece(fid, path, end, stat.st_size)
        yield (
            Chunk(seen.name, (*header, piece), suffix),
            {fid: replace(seen, taken=stat.st_size, cut=True)},
        )
    return None


def _stitch(carry: tuple[str, Seen], path: str, fid: str, seen: Seen) -> _Taken | None:
    """The record a rotation cut: the end of the backup before, the start of this file.
    None while this file has no whole line yet. A file already read from its start holds
    no rest of it: the backup's end is read alone (and found malformed)."""
    before_id, before = carry
    tail = Piece(
        before_id, os.path.join(os.path.dirname(path), before.name), before.taken, before.size
    )
    done = {before_id: replace(before, taken=before.size)}
    if seen.taken:
        return Chunk(before.name, (tail,), ".json"), done
    end = _first(path, fid, 0, seen.size, False)
    if not end:
        return None
    done[fid] = replace(seen, taken=end)
    return Chunk(before.name, (tail, Piece(fid, path, 0, end)), ".json"), done


def _first(path: str, fid: str, start: int, size: int, csv: bool) -> int:
    """Where the first whole record from ``start`` ends (0: none yet), reading on as far as
    the record goes."""
    step = 1 << 16
    stop = min(size, start + step)
    while True:
        end = first_end(_read(path, fid, start, stop), csv)
        if end or stop >= size:
            return start + end if end else 0
        stop = min(size, start + 4 * (stop - start))


def _read(path: str, fid: str, start: int, stop: int) -> bytes:
    if stop <= start:
        return b""
    with open_file(path, fid) as file:
        file.seek(start)
        return file.read(stop - start)


class MovedError(OSError):
    """A listed or planned file is no longer the file at its name, nor (where it was looked
    for) anywhere in its folder: renamed or removed since. Plan again."""


def open_file(path: str, fid: str, *, in_folder: bool = False) -> BinaryIO:
    """The file ``fid`` (:func:`file_id`), open for reading: at ``path``, or, ``in_folder``,
    under any name in its folder (a rotation renames a file, and gives its old name to a new
    one).

    Raises
    ------
    MovedError
        ``path`` holds another file or none, and (``in_folder``) no name in the folder holds it.
    """
    candidates = [path]
    if in_folder:
        folder = os.path.dirname(path)
        with contextlib.suppress(FileNotFoundError):
            candidates += [os.path.join(folder, n) for n in sorted(os.listdir(folder))]
    for candidate in candidates:
        try:
            file = open(candidate, "rb")  # noqa: SIM115 (returned open)
        except (FileNotFoundError, IsADirectoryError):
            continue
        if file_id(os.fstat(file.fileno())) == fid:
            return file
        file.close()
    raise MovedError(f"{path} went between planning and reading")


def _suffix(name: str, reading: Reading) -> str:
    """The chunk's file name ending: its format's, and its compression's."""
    base = {"parquet": ".parquet", "csv": ".csv"}.get(reading.fmt, ".json")
    codec = codec_of(name)
    return base + (name[name.rindex(".") :] if codec else "")


def _say(result: Plan, fid: str, kind: str, note: str) -> None:
    """A note about a file, said once."""
    seen = result.files[fid]
    if kind not in seen.said:
        result.notes.append(Note("changed_after_read" if kind == "changed" else kind, note))
        result.files[fid] = replace(seen, said=(*seen.said, kind))


def _removed(seen: Seen) -> Note:
    left = seen.size - seen.taken
    return Note(
        "removed_unread",
        f"{printable(seen.name)} went before it was read whole: its last {left:,} bytes "
        "were never read",
    )
