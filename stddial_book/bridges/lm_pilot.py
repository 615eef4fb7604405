"""The learning-rate pilot of the recorded SmolLM2 runs (chapter 15): the rule, fixed before the runs.

A pilot trains GRPO once per candidate learning rate, with the main runs' sizes and a seed the main runs do
not use. :func:`choose_learning_rate` then picks the rate the main runs use, by the rule the plan states
(``data/runs/smollm2/PLAN.md``): the highest mean batch pass rate over the pilot's last ``last`` steps; among
rates within ``tie`` of that best, the smallest (a rate that learns as well but moves less is the safer one:
at a rate too high, the DESIGN's CPU probe saw the reward collapse after rising).
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["PILOT_LAST_STEPS", "PILOT_TIE", "choose_learning_rate", "pass_rate_curve"]

PILOT_LAST_STEPS = 10
PILOT_TIE = 0.02


def choose_learning_rate(
    curves: Mapping[float, Sequence[float]], last: int = PILOT_LAST_STEPS, tie: float = PILOT_TIE
) -> float:
    """The learning rate whose pass-rate curve ends highest (mean of its last ``last`` values); among those
    within ``tie`` of the best, the smallest. ``curves`` maps each rate to its per-step batch pass rate."""
    if not curves:
        raise ValueError("no pilot runs: give at least one learning rate's pass-rate curve.")
    ends = {}
    for rate, curve in curves.items():
        values = [float(v) for v in curve]
        if len(values) < last or not all(math.isfinite(v) for v in values[-last:]):
            raise ValueError(f"the pilot at learning rate {rate} has fewer than {last} finite steps; rerun it.")
        ends[float(rate)] = sum(values[-last:]) / last
    best = max(ends.values())
    return min(rate for rate, end in ends.items() if end >= best - tie)


def pass_rate_curve(run: str | os.PathLike) -> list[float]:
    """A recorded run's batch pass rate per optimizer step (``dial/pass_rate`` of its ``metrics.jsonl.gz``)."""
    path = Path(run) / "metrics.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    records = [r for r in records if "dial/pass_rate" in r]
    records.sort(key=lambda r: r["step"])
    return [float(r["dial/pass_rate"]) for r in records]
