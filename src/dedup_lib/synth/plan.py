"""The plan decided before Spark runs: logical messages per sender, and the crashes and
replays drawn from a seeded generator (a few thousand rows at most)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dedup_lib.errors import InputError
from dedup_lib.synth.scenario import REPLAY, RESTART_RESEND, Scenario, Sender, day_scenario

if TYPE_CHECKING:
    pass

#: Levels of each sender's traffic quantiles (the generator interpolates between them).
QUANTILES = 2048
_RESEND_SPACING = 0.01
_REPLAY_SPACING = 0.05
_MAX_BUCKETS = 20_000


@dataclass(frozen=True)
class _SenderPlan:
    sender: Sender
    index: int
    offset: int
    count: int
    quantiles: np.ndarray
    resends: list[tuple[int, float, str]] = field(default_factory=list)
    #: (cause, scenario seconds, delay in seconds) of each crash and replay drawn.
    events: list[tuple[str, float, float]] = field(default_factory=list)

    def position_at(self, seconds: float) -> int:
        """How many of the sender's logical messages are surely sent before ``seconds``."""
        levels = np.linspace(0.0, 1.0, QUANTILES + 1)
        return math.floor(float(np.interp(seconds, self.quantiles, levels)) * self.count)


@dataclass(frozen=True)
class TelemetryPlan:
    """What :func:`generate_telemetry` will produce, decided before Spark runs: logical
    messages per sender and the restart and replay resends (exact counts)."""

    scenario: Scenario
    seed: int
    senders: tuple[_SenderPlan, ...]

    @property
    def logical_messages(self) -> int:
        return sum(p.count for p in self.senders)

    @property
    def attempt_slots(self) -> int:
        """A power of two above the most sends one message can get: ``event_id`` is
        ``logical_id * attempt_slots + attempt - 1``."""
        extra: dict[tuple[int, int], int] = {}
        for p in self.senders:
            for local, _, _ in p.resends:
                extra[(p.index, local)] = extra.get((p.index, local), 0) + 1
        most = max(p.sender.max_retries for p in self.senders) + 1 + max(extra.values(), default=0)
        return 1 << max(0, most - 1).bit_length()

    def resends(self, cause: str) -> int:
        """Number of sends of ``cause`` (restart resends or replays) the plan holds."""
        return sum(1 for p in self.senders for r in p.resends if r[2] == cause)


def _lognormal(rng: np.random.Generator, median: float, sigma: float) -> float:
    return float(median * math.exp(sigma * rng.standard_normal()))


def _intensity(scenario: Scenario, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bucket edges (scenario seconds) and the relative traffic in each bucket."""
    span = scenario.seconds
    buckets = max(1, min(_MAX_BUCKETS, math.ceil(span / 60)))
    edges = np.linspace(0.0, span, buckets + 1)
    mids = (edges[:-1] + edges[1:]) / 2
    start = scenario.start
    hours = ((start.hour * 3600 + start.minute * 60 + start.second + mids) / 3600) % 24
    quiet_from, quiet_to = scenario.quiet_hours
    if quiet_from <= quiet_to:
        quiet = (hours >= quiet_from) & (hours < quiet_to)
    else:
        quiet = (hours >= quiet_from) | (hours < quiet_to)
    weights = np.where(quiet, scenario.quiet_factor, 1.0)
    bursts = round(scenario.bursts_per_day * span / 86400)
    for _ in range(bursts):
        at = rng.uniform(0, span)
        inside = (mids >= at) & (mids < at + scenario.burst_minutes * 60)
        weights = np.where(inside, weights * scenario.burst_factor, weights)
    return edges, weights


def _quantiles(edges: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Scenario seconds at each of ``QUANTILES + 1`` evenly spaced traffic levels."""
    cumulative = np.concatenate([[0.0], np.cumsum(weights * np.diff(edges))])
    cumulative /= cumulative[-1]
    levels = np.linspace(0.0, 1.0, QUANTILES + 1)
    quantiles: np.ndarray = np.interp(levels, cumulative, edges)
    return quantiles


def _mean_sends(ack_loss: float, max_retries: int) -> float:
    return 1.0 + sum(ack_loss**r for r in range(1, max_retries + 1))


def plan_telemetry(rows: int, seed: int = 0, scenario: Scenario | None = None) -> TelemetryPlan:
    """Split about ``rows`` sends among the senders and draw their crashes and replays."""
    scenario = scenario or day_scenario()
    if rows < 1:
        raise InputError(f"generate_telemetry: rows must be at least 1, got {rows}")
    days = scenario.seconds / 86400
    total_share = sum(s.share for s in scenario.senders)
    plans: list[_SenderPlan] = []
    offset = 0
    for index, sender in enumerate(scenario.senders):
        rng = np.random.default_rng([seed, index])
        edges, weights = _intensity(scenario, rng)
        target = rows * sender.share / total_share
        crashes = sender.crashes_per_day * days + sum(
            o.crashes_per_hour * (o.end - o.start).total_seconds() / 3600
            for o in scenario.outages
            if o.hits(sender)
        )
        extra = crashes * sender.unacked + sender.replays_per_day * days * sender.replay_batch
        quantiles = _quantiles(edges, weights)
        levels = np.linspace(0.0, 1.0, QUANTILES + 1)
        mean = _mean_sends(sender.ack_loss, sender.max_retries)
        for o in scenario.outages:
            if o.hits(sender):
                bounds = [scenario.offset(o.start), scenario.offset(o.end)]
                low, high = np.interp(bounds, quantiles, levels)
                outage_mean = _mean_sends(o.ack_loss, sender.max_retries)
                mean += float(high - low) * (outage_mean - mean)
        count = max(1, round((target - extra) / mean))
        plan = _SenderPlan(sender, index, offset, count, quantiles)
        _draw_resends(plan, scenario, rng)
        plans.append(plan)
        offset += count
    return TelemetryPlan(scenario, seed, tuple(plans))


def _draw_resends(plan: _SenderPlan, scenario: Scenario, rng: np.random.Generator) -> None:
    sender, span = plan.sender, scenario.seconds
    windows = [(0.0, span, sender.crashes_per_day * span / 86400)]
    for outage in scenario.outages:
        if outage.hits(sender):
            begin, end = (
                max(0.0, scenario.offset(outage.start)),
                min(span, scenario.offset(outage.end)),
            )
            if end > begin:
                windows.append((begin, end, outage.crashes_per_hour * (end - begin) / 3600))
    for begin, end, expected in windows:
        for _ in range(round(expected)):
            crash = rng.uniform(begin, end)
            drawn = _lognormal(rng, sender.restart_median, sender.restart_sigma)
            delay = min(3600.0, max(5.0, sender.retry_span, drawn))
            last = plan.position_at(crash)
            plan.events.append((RESTART_RESEND, crash, delay))
            for order, local in enumerate(range(max(0, last - sender.unacked), last)):
                plan.resends.append(
                    (local, crash + delay + order * _RESEND_SPACING, RESTART_RESEND)
                )
    for _ in range(round(sender.replays_per_day * span / 86400)):
        delay = max(sender.replay_min, _lognormal(rng, sender.replay_median, sender.replay_sigma))
        if delay >= span:
            continue
        batch_end = rng.uniform(0, span - delay)
        last = plan.position_at(batch_end)
        plan.events.append((REPLAY, batch_end, delay))
        for order, local in enumerate(range(max(0, last - sender.replay_batch), last)):
            plan.resends.append((local, batch_end + delay + order * _REPLAY_SPACING, REPLAY))
