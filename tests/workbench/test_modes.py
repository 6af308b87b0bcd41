"""workbench.modes: the explorer's caches per partitioning mode, handed over once built, a
failed build kept to be said, and whether any is still being built. No Spark: the caches are
stand-ins."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, cast

from dedup_lib.workbench.modes import ModeCaches, ModeUpdate

BUILT, LATER = cast(Any, "cache without partitioning"), cast(Any, "cache with partitioning")


def test_a_mode_is_handed_over_once_built_and_a_failure_is_said() -> None:
    caches = ModeCaches({False: BUILT})
    pending: dict[bool, Future[Any]] = {True: Future()}
    ended: list[str] = []
    caches.add(pending, lambda: ended.append("done"))
    assert caches.collect() == ({False: BUILT}, ModeUpdate([], waiting=True))
    pending[True].set_result(LATER)
    caches.wait()
    assert ended == ["done"]
    assert caches.collect() == ({False: BUILT, True: LATER}, ModeUpdate([], waiting=False))


def test_a_failed_build_is_kept_and_the_mode_is_not_waited_for() -> None:
    caches = ModeCaches({})
    failing: Future[Any] = Future()
    caches.add({True: failing}, lambda: None)
    error = MemoryError("the driver cannot hold it")
    failing.set_exception(error)
    found, update = caches.collect()
    assert found == {}
    assert update == ModeUpdate([(True, error)], waiting=False)
    assert caches.collect()[1].failed == [(True, error)]
