"""The memory this machine has, and what a local Spark driver may take of it: the heap
:func:`dedup_lib.get_spark` gives its JVM, the largest result one collect may bring back, and
what is available now for the explorer's cache (:mod:`dedup_lib.sweep.footprint`)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

_GIB = 2**30


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_limit() -> int | None:
    """The memory this process may use, in bytes: the smallest ``memory.max`` of its cgroup
    and those above it (cgroup v2: systemd's ``MemoryMax=``, a container's limit), else the
    machine's memory; None where neither is known."""
    limits = [m for m in (physical_memory(), *_cgroup_limits()) if m is not None]
    return min(limits) if limits else None


def _cgroup_limits() -> list[int]:
    """The memory limits of this process's cgroup and of each above it that sets one: v2's
    ``memory.max``, v1's ``memory.limit_in_bytes`` (a number beyond the machine's: none)."""
    try:
        with open("/proc/self/cgroup") as groups:
            lines = groups.read().splitlines()
    except OSError:
        return []
    found: list[int] = []
    for line in lines:
        number, controllers, path = [*line.split(":", 2), "", ""][:3]
        if number == "0" and not controllers:
            found += _limits(Path("/sys/fs/cgroup"), path, "memory.max")
        elif "memory" in controllers.split(","):
            found += _limits(Path("/sys/fs/cgroup/memory"), path, "memory.limit_in_bytes")
    return found


def _limits(root: Path, path: str, name: str) -> list[int]:
    """The limits in file ``name`` of the cgroup ``path`` under ``root`` and its parents."""
    found, parts = [], [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        try:
            text = (root.joinpath(*parts[:depth]) / name).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            found.append(int(text))
    return found


def driver_memory(physical: int | None = None) -> str:
    """The heap of a local driver JVM: ``DEDUP_DRIVER_MEMORY`` if set, else a quarter of this
    machine's memory in whole GiB, from 2 to 32 (4 where the memory is unknown). The
    explorer brings every send of a repeated key into the driver: on 100 M sends of a busy
    day, 1.2 GiB as Spark returns them."""
    if given := os.environ.get("DEDUP_DRIVER_MEMORY"):
        return given
    memory = physical_memory() if physical is None else physical
    if memory is None:
        return "4g"
    return f"{min(max(memory // 4 // _GIB, 2), 32)}g"


def format_size(count: float) -> str:
    """``count`` bytes as a reader takes them in: ``160 B``, ``4.0 KiB``, ``5.1 MiB``,
    ``1.2 GiB``."""
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count:,.1f} GiB"


def size_in_bytes(text: str) -> int:
    """A Spark size (``1g``, ``512m``, ``2048k``, ``0``) in bytes."""
    value = text.strip().lower().removesuffix("b")
    scale = {"k": 2**10, "m": 2**20, "g": _GIB, "t": 2**40}.get(value[-1:], 1)
    return int(float(value.rstrip("kmgt")) * scale)


def result_size(heap: str) -> str:
    """``spark.driver.maxResultSize`` for a driver of ``heap`` (``6g``, ``4096m``): half of
    it, where Spark's default is 1 GiB whatever the heap. A collect is held in the heap,
    beside the driver's own work, while it streams to Python."""
    return f"{size_in_bytes(heap) // 2 // 2**20}m"


def available_memory() -> int | None:
    """Memory available to a new allocation (Linux's MemAvailable), or None elsewhere."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def release_freed() -> bool:
    """Hand the memory that this process has freed back to the system (glibc's
    ``malloc_trim``): False where the C library has none. The C allocator keeps what is freed
    between blocks still in use: Spark's Arrow batches, let go one by one while their copies
    are made in new blocks, stay resident (docs/decisions/sweep-in-memory.md)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    return bool(trim(0))
