"""memory: the heap a local driver gets, and the largest result it may collect, from the
machine's memory; Spark's sizes read. The session's own settings are test_spark's."""

from __future__ import annotations

import sys

import pytest

from dedup_lib import memory


@pytest.mark.parametrize(
    ("physical", "heap"),
    [(8 * 2**30, "2g"), (24 * 2**30, "6g"), (23.4 * 2**30, "5g"), (512 * 2**30, "32g")],
)
def test_the_driver_heap_is_a_quarter_of_the_machine(monkeypatch, physical, heap):
    monkeypatch.delenv("DEDUP_DRIVER_MEMORY", raising=False)
    assert memory.driver_memory(int(physical)) == heap
    monkeypatch.setattr(memory, "physical_memory", lambda: None)
    assert memory.driver_memory() == "4g"
    monkeypatch.setenv("DEDUP_DRIVER_MEMORY", "1500m")
    assert memory.driver_memory(int(physical)) == "1500m"


def test_a_collect_may_take_half_the_heap():
    assert memory.result_size("6g") == "3072m"
    assert memory.result_size("1500m") == "750m"
    assert memory.size_in_bytes(memory.result_size("5g")) == 5 * 2**30 // 2


@pytest.mark.parametrize(
    ("text", "size"),
    [("1g", 2**30), ("512m", 512 * 2**20), ("2048k", 2 * 2**20), ("0", 0), ("4096", 4096)],
)
def test_spark_sizes(text, size):
    assert memory.size_in_bytes(text) == size


def resident() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_memory_goes_back_to_the_system():
    block = b"x" * (16 << 20)
    del block  # a mapped block freed: glibc keeps the blocks up to its size in its heap after
    held = [b"x" * (1 << 20) for _ in range(400)]
    del held[::2]  # 200 MiB freed between blocks still in use: kept by the allocator
    freed = resident()
    assert memory.release_freed()
    assert freed - resident() > 150 << 20


def test_without_a_c_library_nothing_is_released(monkeypatch):
    monkeypatch.setattr(memory.ctypes, "CDLL", lambda name: object())
    assert memory.release_freed() is False


def test_the_limit_is_the_smallest_of_the_machine_and_the_cgroups_above(monkeypatch, tmp_path):
    """cgroup v2's memory.max (systemd's MemoryMax=) and v1's memory.limit_in_bytes, read up
    the tree; "max" and v1's huge number are no limit."""
    v2 = tmp_path / "v2" / "system.slice" / "dedup.service"
    v2.mkdir(parents=True)
    (v2 / "memory.max").write_text("10737418240\n")
    (v2.parent / "memory.max").write_text("max\n")
    assert memory._limits(tmp_path / "v2", "/system.slice/dedup.service", "memory.max") == [
        10 << 30
    ]
    v1 = tmp_path / "v1" / "docker" / "abc"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (v1.parent / "memory.limit_in_bytes").write_text(str(3 << 30))
    found = memory._limits(tmp_path / "v1", "/docker/abc", "memory.limit_in_bytes")
    assert sorted(found) == [3 << 30, 9223372036854771712]
    monkeypatch.setattr(memory, "physical_memory", lambda: 24 << 30)
    monkeypatch.setattr(memory, "_cgroup_limits", lambda: found)
    assert memory.memory_limit() == 3 << 30
