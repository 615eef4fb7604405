"""Benchmark: the silent-fraction curve of a Big-Math-sized table, on its k-histogram vs per row.

A synthetic table of 251,122 prompts with k of 64 (Big-Math's size and n), G = 1..64, Bernoulli
model. Both ways are timed in one run; the histogram way (the package's) must take <= 50 ms,
including building the histogram from the rows.

    python bench/bench_silent_fraction.py
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import numpy as np

from stddial_book import silent_probability
from stddial_book.corpora.histograms import SolveCounts, silent_fraction


def main() -> None:
    rng = np.random.default_rng(0)
    k = rng.integers(0, 65, size=251_122)
    sizes = np.arange(1, 65)
    timings = {"histogram": [], "per_row": []}
    for _ in range(5):
        start = time.perf_counter()
        curve = silent_fraction(SolveCounts("synthetic", k, 64).histogram(), sizes)
        timings["histogram"].append(time.perf_counter() - start)
        start = time.perf_counter()
        direct = np.array([silent_probability(k / 64, g).mean() for g in sizes])
        timings["per_row"].append(time.perf_counter() - start)
    assert np.allclose(curve, direct, rtol=1e-10)
    med = {name: statistics.median(v) * 1e3 for name, v in timings.items()}
    result = {
        "benchmark": "silent fraction, G = 1..64, 251,122 prompts",
        "median_ms": med,
        "goal_ms": 50.0,
        "speedup_histogram_over_per_row": med["per_row"] / med["histogram"],
    }
    out = Path(__file__).parent / "results" / "silent_fraction.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
