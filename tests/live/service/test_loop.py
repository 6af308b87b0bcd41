"""The micro-batch loop: a turn a step and a beat, at once while the runner has more, until
stopped; a failure kept where the metrics and ``Watch.wait`` find it, the runner stopped
either way. What it keeps of the micro-batches is bounded: a monitor runs for weeks."""

from __future__ import annotations

import threading
import time

import pandas as pd

from dedup_lib.live.output.lines import BatchLine
from dedup_lib.live.service.loop import KEPT_LINES, KEPT_LOADS, Loop, Progress
from dedup_lib.live.service.pulse import Pulse


class Counting:
    """A runner's face with ``more`` for its first ``more`` steps; fails at step ``fail``."""

    def __init__(self, more: int = 0, fail: int | None = None) -> None:
        self.steps, self.left, self.fail = 0, more, fail
        self.stopped = threading.Event()
        self.refused = None

    @property
    def more(self) -> bool:
        return self.left > 0

    def step(self) -> None:
        self.steps += 1
        self.left -= 1
        if self.steps == self.fail:
            raise OSError("disk full")

    def settle(self) -> None:
        pass

    def stop(self) -> None:
        self.stopped.set()


def test_it_steps_at_once_while_there_is_more_then_every_turn_until_stopped():
    runner, pulse = Counting(more=5), Pulse(every=1.0)
    loop = Loop(runner, pulse, Progress(), every=1.0)
    started = time.monotonic()
    loop.thread.start()
    assert runner.stopped.wait(0) is False
    while runner.steps < 5 and time.monotonic() - started < 5:
        time.sleep(0.01)
    assert runner.steps == 5, "five at once, while the runner has more"
    while runner.steps < 6 and time.monotonic() - started < 5:
        time.sleep(0.01)
    assert runner.steps == 6, "then one a turn"
    assert time.monotonic() - started >= 1.0, "the sixth waited for its turn"
    loop.stopping.set()
    loop.thread.join(5)
    assert not loop.thread.is_alive()
    assert runner.stopped.is_set()
    assert pulse.stopped
    assert loop.progress.error is None


def test_a_failure_is_kept_and_the_runner_stopped():
    runner, pulse = Counting(more=3, fail=2), Pulse(every=0.01)
    loop = Loop(runner, pulse, Progress(), every=0.01)
    loop.thread.start()
    loop.thread.join(5)
    assert isinstance(loop.progress.error, OSError)
    assert pulse.error is loop.progress.error
    assert runner.stopped.is_set()
    assert pulse.stopped
    assert pulse.health() == (False, "the micro-batch loop failed: OSError: disk full")


class FailingToStop(Counting):
    """A runner whose stop fails (the alerts it appends as it stops: a full disk)."""

    def stop(self) -> None:
        self.stopped.set()
        raise OSError("no space left to append the alerts")


def test_a_stop_that_fails_is_kept_unless_a_failure_came_first():
    runner, pulse = FailingToStop(), Pulse(every=0.01)
    loop = Loop(runner, pulse, Progress(), every=0.01)
    loop.thread.start()
    loop.stopping.set()
    loop.thread.join(5)
    assert str(loop.progress.error) == "no space left to append the alerts"
    assert pulse.error is loop.progress.error
    assert pulse.stopped
    runner, pulse = FailingToStop(more=3, fail=2), Pulse(every=0.01)
    loop = Loop(runner, pulse, Progress(), every=0.01)
    loop.thread.start()
    loop.thread.join(5)
    assert str(loop.progress.error) == "disk full", "the first failure is what is told"


def test_what_it_keeps_is_bounded_and_the_loads_added_up():
    told: list[BatchLine] = []
    progress = Progress(told.append)
    line = BatchLine(batch=0, minutes=pd.DataFrame())
    for _ in range(KEPT_LINES + 5):
        progress.committed(line)
    for _ in range(KEPT_LOADS + 5):
        progress.read({"read": 2, "quarantined": 1})
    assert len(progress.lines) == KEPT_LINES
    assert len(told) == KEPT_LINES + 5
    assert len(progress.loads) == KEPT_LOADS
    assert progress.loaded == {
        "read": 2 * (KEPT_LOADS + 5), "quarantined": KEPT_LOADS + 5,
        "micro_batches": KEPT_LOADS + 5,
    }  # fmt: skip
