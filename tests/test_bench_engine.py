"""bench/results/engine_smollm2.json (the engine against TRL on SmolLM2 with LoRA) and what bench/README.md
quotes of it: the file is consistent with itself, and the ratio, its per-repeat values, both sides' samples/s
and the engine's step time in the README are the file's."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def result() -> dict:
    return json.loads((ROOT / "bench" / "results" / "engine_smollm2.json").read_text())


def test_the_result_is_consistent(result) -> None:
    engine, trl = result["engine"], result["trl"]
    assert len(engine) == len(trl) == result["settings"]["repeats"]
    ratios = [e["samples_per_s"] / t["samples_per_s"] for e, t in zip(engine, trl)]
    assert result["ratios_per_repeat"] == pytest.approx(ratios)
    assert result["ratio_samples_per_s"] == pytest.approx(statistics.median(ratios))
    for run in engine + trl:
        assert run["samples"] == run["steps"] * 64 and run["samples_per_s"] == pytest.approx(
            run["samples"] / run["wall_s"]
        )
    assert result["engine_step_s_median"] == pytest.approx(statistics.median(s for e in engine for s in e["step_s"]))
    assert result["provenance"]["threads"] == {"torch": 1, "OMP_NUM_THREADS": "1"}


def test_the_readme_quotes_the_result(result) -> None:
    text = " ".join((ROOT / "bench" / "README.md").read_text().split())
    at = text.index("**Result** (`results/engine_smollm2.json`")
    section = text[at : text.index("Where the time goes", at)]
    assert f"**{result['ratio_samples_per_s']:.2f}x**" in section
    assert "per repeat " + ", ".join(f"{r:.2f}" for r in result["ratios_per_repeat"]) in section
    assert f"the engine {result['engine_samples_per_s_median']:.2f} samples/s" in section
    assert f"TRL {result['trl_samples_per_s_median']:.2f} samples/s" in section
    assert f"{result['engine_step_s_median']:.1f} s of wall time" in section
    assert f"generation {result['engine_generation_s_median']:.1f} s" in section
    assert f"update {result['engine_update_s_median']:.1f} s" in section
