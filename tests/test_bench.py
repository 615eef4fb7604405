"""The benchmark numbers the READMEs state are the ones the committed result files hold.

`bench/results/*.json` are written by the benchmark scripts (they need TRL and minutes of a quiet
machine, so they are not rerun here); the prose in `README.md` and `bench/README.md` quotes them.
These checks make a stale quotation fail: the trainer ratio, its per-repeat values, the two
samples/s medians and the pass/fail verdict against the goal, and the quick-run wall times.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _section(text: str, start: str) -> str:
    """The paragraph of ``text`` that begins with ``start``."""
    at = text.index(start)
    end = text.find("\n\n", at)
    return text[at:] if end < 0 else text[at:end]


@pytest.fixture(scope="module")
def trainer() -> dict:
    return json.loads((RESULTS / "trainer.json").read_text())


@pytest.fixture(scope="module")
def bench_result(trainer) -> str:
    return " ".join(_section((ROOT / "bench" / "README.md").read_text(), "**Result**").split())


def test_the_result_file_is_internally_consistent(trainer) -> None:
    ratios = trainer["ratios_per_repeat"]
    assert len(ratios) == trainer["settings"]["repeats"]
    assert trainer["ratio_ours_over_trl"] == pytest.approx(sorted(ratios)[len(ratios) // 2])
    assert trainer["pass"] == (trainer["ratio_ours_over_trl"] >= trainer["goal"])
    ours, trl = trainer["summary"]["ours"], trainer["summary"]["trl"]
    for o, t, r in zip(ours["samples_per_s_all"], trl["samples_per_s_all"], ratios):
        assert o / t == pytest.approx(r)


def test_bench_readme_quotes_the_trainer_result(trainer, bench_result) -> None:
    ratio = f"{trainer['ratio_ours_over_trl']:.2f}"
    assert re.findall(r"\*\*(\d+\.\d+)x\*\*", bench_result) == [ratio]
    repeats = re.search(r"per repeat ([\d., ]+\d)", bench_result).group(1)
    assert repeats == ", ".join(f"{r:.2f}" for r in trainer["ratios_per_repeat"])
    ours, trl = trainer["summary"]["ours"], trainer["summary"]["trl"]
    quoted = re.search(r"ours (\d+) samples/s, TRL (\d+) samples/s", bench_result)
    assert quoted.groups() == (f"{ours['samples_per_s_median']:.0f}", f"{trl['samples_per_s_median']:.0f}")
    verdict = "meets the 2.0x goal" if trainer["pass"] else "below the 2.0x goal"
    assert verdict in bench_result
    assert trainer["goal"] == 2.0


def test_readme_quotes_the_trainer_ratio(trainer) -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    found = re.findall(r"(\d+\.\d+)x the samples per second of TRL", text)
    assert found == [f"{trainer['ratio_ours_over_trl']:.2f}"]


def test_bench_readme_quotes_the_quick_run_times() -> None:
    runs = {label: json.loads((RESULTS / f"quick_runs_{label}.json").read_text()) for label in ("before", "after")}
    text = " ".join(_section((ROOT / "bench" / "README.md").read_text(), "**Effect on the build**").split())
    for label, result in runs.items():
        assert f"{label} {result['total_s']:.0f} s" in text
        assert f"RL {result['rl_total_s']:.0f} s" in text
        sft = next(r["wall_s"] for r in result["runs"] if r["run"] == "sft")
        assert f"SFT {sft:.0f} s" in text
    assert runs["before"]["package_commit"] != runs["after"]["package_commit"]


def test_measure_meets_its_targets() -> None:
    """bench_measure.py: the converted SmolLM2 loads within 2 s and measure samples at 80% or more of a bare
    model.generate's tokens per second (the same completions on both sides)."""
    result = json.loads((RESULTS / "measure.json").read_text())
    assert result["load_s_median"] <= 2.0
    ratio = result["measure_tokens_per_s"] / result["generate_tokens_per_s"]
    assert ratio == pytest.approx(result["ratio_measure_to_generate"]) and ratio >= 0.8
    assert result["batch_completions"] == 64 and result["repeats"] >= 3


# ------------------------------------------ bench_engine_smollm2.py: the engine against TRL on SmolLM2 with LoRA


@pytest.fixture(scope="module")
def engine_result() -> dict:
    return json.loads((RESULTS / "engine_smollm2.json").read_text())


def test_the_engine_result_is_consistent(engine_result) -> None:
    result = engine_result
    engine, trl = result["engine"], result["trl"]
    assert len(engine) == len(trl) == result["settings"]["repeats"]
    ratios = [e["samples_per_s"] / t["samples_per_s"] for e, t in zip(engine, trl)]
    assert result["ratios_per_repeat"] == pytest.approx(ratios)
    assert result["ratio_samples_per_s"] == pytest.approx(statistics.median(ratios))
    for run in engine + trl:
        assert run["samples"] == run["steps"] * 64
        assert run["samples_per_s"] == pytest.approx(run["samples"] / run["wall_s"])
    assert result["engine_step_s_median"] == pytest.approx(statistics.median(s for e in engine for s in e["step_s"]))
    assert result["provenance"]["threads"] == {"torch": 1, "OMP_NUM_THREADS": "1"}


def test_bench_readme_quotes_the_engine_result(engine_result) -> None:
    result = engine_result
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
