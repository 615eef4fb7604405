"""The dial-only ablation: its arms and grid, the step-size control, the power analysis and the study,
checked on hand-made logs with answers worked by hand, and every arm run at the tiny profile's size."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from conftest import TINY

from stddial_book.core.outdir import MARKER
from stddial_book.experiments.ablation import study as ab
from stddial_book.experiments.ablation.record import record_ablation
from stddial_book.rl import profiles
from stddial_book.rl.runlog import load_run


def test_the_arms_differ_in_the_normaliser_alone() -> None:
    base = dataclasses.asdict(ab.BASE)
    changed = {
        arm: {k for k, v in dataclasses.asdict(recipe).items() if v != base[k]} for arm, recipe in ab.ARMS.items()
    }
    assert changed == {"divide": {"name"}, "no_divide": {"name", "scale_std"}, "filter": {"name", "dynamic_sampling"}}
    assert ab.BASE.kl_coef == 0.0 and ab.BASE.loss_aggregation == "seq-mean-token-mean" and ab.BASE.scale_std
    assert (ab.BASE.clip_low, ab.BASE.clip_high, ab.BASE.reward_correct, ab.BASE.reward_wrong) == (0.2, 0.2, 1.0, 0.0)


def test_the_grid_and_the_count_of_comparisons() -> None:
    assert len(set(ab.CELLS)) == 8 and {c.group_size for c in ab.CELLS} == {8, 32}
    assert ab.comparison_count() == 32  # 8 cells x 2 contrasts x 2 measures
    reference = profiles.PROFILES["reference"]
    big = ab.ablation_config(reference, "no_divide", ab.Cell(32, "sgd", False), 3, lr=0.02)
    assert (big.group_size, big.prompts_per_step, big.optimizer, big.max_grad_norm, big.lr) == (32, 8, "sgd", 0.0, 0.02)
    assert big.sample_budget == 32768 and big.eval_every == 128 and not big.recipe.scale_std
    small = ab.ablation_config(reference, "divide", ab.Cell(8, "adamw", True), 0)
    assert (small.prompts_per_step * small.group_size, small.lr, small.max_grad_norm) == (256, 1e-4, 1.0)
    assert "optimizer" not in small.to_dict() and small.pool_size == 256
    with pytest.raises(ValueError, match="arm must be one of"):
        ab.ablation_config(reference, "dapo", ab.Cell(8, "adamw", True), 0)


def test_sgd_rates_match_the_adamw_anchor_by_hand() -> None:
    """AdamW divide steps 0.2 at G = 8 with the clip; SGD at the pilot's 1e-3 steps 5e-4 (divide) and
    1.25e-4 (no_divide): per unit rate 0.5 and 0.125, so the rates are 0.2/0.5 = 0.4 and 0.2/0.125 = 1.6."""
    label = ab.run_label
    pilot = {
        label("divide", ab.Cell(8, "adamw", True), 0): 0.2,
        label("divide", ab.Cell(8, "sgd", True), 0): 5e-4,
        label("no_divide", ab.Cell(8, "sgd", True), 0): 1.25e-4,
    }
    lrs = ab.matched_sgd_lrs(pilot)
    assert lrs == pytest.approx({"divide-G8-sgd-clip": 0.4, "no_divide-G8-sgd-clip": 1.6}, rel=1e-12)
    assert set(ab.pilot_cells([ab.Cell(8, "sgd", True)])) == {
        ("divide", ab.Cell(8, "adamw", True)),
        ("divide", ab.Cell(8, "sgd", True)),
        ("no_divide", ab.Cell(8, "sgd", True)),
        ("filter", ab.Cell(8, "sgd", True)),
    }
    quarter = ab.matched_sgd_lrs(pilot, {"G8-sgd-clip": 0.25})
    assert quarter == pytest.approx({"divide-G8-sgd-clip": 0.1, "no_divide-G8-sgd-clip": 0.4}, rel=1e-12)
    with pytest.raises(ValueError, match="must be > 0"):
        ab.matched_sgd_lrs({**pilot, label("filter", ab.Cell(8, "sgd", True), 0): 0.0})


def test_the_sgd_step_length_is_chosen_for_both_dial_arms_together() -> None:
    """Fractions 1, 1/4, 1/16, 1/64 of AdamW's step: pool accuracies (divide, no_divide) of (0.1,
    0.5), (0.4, 0.3), (0.35, 0.35), (0.2, 0.2): means 0.3, 0.35, 0.35, 0.2. The best mean ties
    between 1/4 and 1/16, and the tie goes to the shorter step, 1/16; divide alone would pick 1/4."""
    cell = ab.Cell(32, "sgd", False)
    runs = ab.tuning_runs([cell, ab.Cell(8, "adamw", True)])
    assert len(runs) == 8 and len(ab.tuning_runs()) == 32  # 4 SGD cells x 4 fractions x 2 arms
    values = {(1.0, "divide"): 0.1, (1.0, "no_divide"): 0.5, (0.25, "divide"): 0.4, (0.25, "no_divide"): 0.3}
    values.update({(0.0625, "divide"): 0.35, (0.0625, "no_divide"): 0.35})
    values.update({(0.015625, "divide"): 0.2, (0.015625, "no_divide"): 0.2})
    accuracy = {label: values[(fraction, arm)] for label, arm, _cell, fraction in runs}
    assert ab.choose_fractions(accuracy, [cell]) == {"G32-sgd-noclip": 0.0625}
    assert all(label.endswith(f"seed{ab.TUNING_SEED}") for label, *_ in runs)
    changes = ab.tuning_changes(cell, 0.01)
    assert (changes["sample_budget"], changes["eval_every"], changes["lr"], changes["eval_samples"]) == (
        8192,
        32,
        0.01,
        4,
    )


def _log(start_k, final_k, heldout, n=4, norm=1.0, final_at=512):
    """A run log: the pool measured at step 0 and at the end (k of n per prompt), held-out beside it."""
    return [
        {"step": 0, "pool/k": list(start_k), "pool/n": n, "samples/generated": 0, "eval/accuracy_sampled": 0.1},
        {"step": 1, "update_norm": norm, "grad_norm": 0.5, "samples/generated": 256, "updates": 1},
        {"step": 2, "update_norm": 3 * norm, "grad_norm": 2.0, "samples/generated": final_at, "updates": 2},
        {
            "step": 2,
            "pool/k": list(final_k),
            "pool/n": n,
            "samples/generated": final_at,
            "eval/accuracy_sampled": heldout,
        },
    ]


START = [0, 4, 1, 3, 2, 4, 0, 3]  # the hardest quarter of 8 prompts: positions 0 and 6 (k = 0)


def test_hardest_quartile_and_a_runs_measures_by_hand() -> None:
    other = [1, 4, 1, 3, 2, 4, 0, 3]  # mean start k/n: prompt 6 0, prompt 0 0.125, prompt 2 0.25, ...
    mask = ab.hardest_quartile_of([_log(START, START, 0.3), _log(other, other, 0.3)])
    assert mask.tolist() == [True, False, False, False, False, False, True, False]
    run = _log(START, [2, 4, 1, 3, 2, 4, 1, 3], 0.35)
    assert ab.pool_accuracy(run) == pytest.approx(20 / 32)  # 20 correct of 8 x 4
    measures = ab.run_measures(run, mask)
    assert measures == pytest.approx(
        {
            "hardest_quartile": (2 / 4 + 1 / 4) / 2,
            "heldout": 0.35,
            "other_quartiles": (4 + 1 + 3 + 2 + 4 + 3) / 6 / 4,  # the six other prompts' final k of 4
            "update_norm": 2.0,
            "updates": 2,
            "grad_norm": 1.25,
            "grad_above_one": 0.5,
        }
    )  # gradient norms 0.5 and 2.0: mean 1.25, one step of two above the clip at 1
    halfway = ab.run_measures(run, mask, samples=256)  # halfway between 0 and 0.375; held-out 0.1 to 0.35
    assert halfway["hardest_quartile"] == pytest.approx(0.1875) and halfway["heldout"] == pytest.approx(0.225)


def _hard(value: float) -> list[int]:
    """Final pool counts whose hardest quarter (positions 0 and 6, n = 4) averages ``value``."""
    k = round(value * 8)
    return [k // 2, 4, 1, 3, 2, 4, k - k // 2, 3]


def test_seed_sds_by_hand() -> None:
    """Two recipes, hardest-quartile finals 0.25/0.5/0.75 and 0.5/0.5/0.5: SDs 0.25 and 0; pooled
    √((0.125 + 0)/4) = 0.1768; the seed-by-seed differences −0.25, 0, 0.25 have SD 0.25."""
    runs = {
        "a": [_log(START, _hard(v), 0.3) for v in (0.25, 0.5, 0.75)],
        "b": [_log(START, _hard(0.5), h) for h in (0.3, 0.4, 0.5)],
    }
    sds = ab.seed_sds(runs)
    quartile = sds["hardest_quartile"]
    assert quartile["sd"] == pytest.approx({"a": 0.25, "b": 0.0})
    assert quartile["pooled_sd"] == pytest.approx(math.sqrt(0.125 / 4)) and quartile["df"] == 4
    assert quartile["paired_sd"] == pytest.approx({"a-b": 0.25})
    assert sds["heldout"]["sd"] == pytest.approx({"a": 0.0, "b": 0.1}) and sds["start"] == 0.0


def test_detectable_effect_and_seeds_against_the_tables() -> None:
    """Paired, one comparison, 50% power: the MDE is t(0.975, 9) · sd/√10 = 2.262157 · 1/√10 =
    0.715356; unpaired at effect size 1, α = 0.05, 80% power: the classic 17 per group; Bonferroni
    over m = 2 is α = 0.025 a test."""
    assert ab.detectable_effect(1.0, 10, 1, power=0.5, paired=True) == pytest.approx(0.715356, abs=2e-6)
    assert ab.seeds_needed(1.0, 1.0, 1) == 17
    assert ab.detectable_effect(1.0, 17, 1) <= 1.0 < ab.detectable_effect(1.0, 16, 1)
    assert ab.detectable_effect(1.0, 10, 2) == pytest.approx(ab.detectable_effect(1.0, 10, 1, alpha=0.025))
    assert ab.detectable_effect(1.0, 1, 1) == math.inf
    with pytest.raises(ValueError, match="mde > 0"):
        ab.seeds_needed(0.1, 0.0, 1)


def test_power_analysis_on_the_recorded_reference_runs() -> None:
    """The design's seeds follow from the committed reference runs (5 seeds of each recipe)."""
    from stddial_book.rl.runlog import recorded_runs

    runs = {k: [load_run(p)[1] for p in v] for k, v in recorded_runs("reference").items()}
    analysis = ab.power_analysis(runs)
    quartile = analysis["hardest_quartile"]
    assert analysis["comparisons"] == 32 and quartile["df"] == 12
    assert 0 < quartile["pooled_sd"] < quartile["pooled_sd_upper"]
    assert quartile["seeds"] <= quartile["seeds_upper"] <= ab.DESIGN_SEEDS
    assert quartile["mde_at_design_upper"] <= 0.04
    assert analysis["start"] < min(quartile["mean"].values())  # the hardest quarter has moved by then
    cost = ab.design_cost({8: 90.0, 32: 60.0})
    assert cost["runs"] == 288 and cost["cpu_minutes"] == pytest.approx(3 * 12 * 4 * (90 + 60) / 60)


def test_the_study_of_hand_made_runs() -> None:
    """Cell G8-adamw-clip with all three arms, G32-sgd-noclip with two: 3 contrasts × 2 measures = 6
    comparisons. Divide's hardest quarter ends at 0.5, 0.625, 0.75 (mean 0.625), no_divide's at
    0.25, 0.375, 0.5 (0.375): a difference of 0.25; on held-out, divide ends at 0.32 on average, no_divide at 0.31
    (+0.01) and filter at 0.435 (+0.115)."""
    runs = {}
    for seed, v in enumerate((0.5, 0.625, 0.75)):
        runs[f"divide-G8-adamw-clip-seed{seed}"] = _log(START, _hard(v), 0.3 + 0.02 * seed, norm=1.0)
        runs[f"no_divide-G8-adamw-clip-seed{seed}"] = _log(START, _hard(v - 0.25), 0.3 + 0.01 * seed, norm=0.5)
        runs[f"filter-G8-adamw-clip-seed{seed}"] = _log(START, _hard(v), 0.425 + 0.01 * seed, norm=1.5)
        runs[f"divide-G32-sgd-noclip-seed{seed}"] = _log(START, _hard(0.5), 0.3)
        runs[f"no_divide-G32-sgd-noclip-seed{seed}"] = _log(START, _hard(0.5), 0.3)
    study = ab.ablation_summary(runs, draws=2000)
    assert study["comparisons"] == 6
    dial = study["cells"]["G8-adamw-clip"]["divide-no_divide"]
    assert dial["hardest_quartile"]["difference"] == pytest.approx(0.25)
    assert dial["hardest_quartile"]["p_bonferroni"] == pytest.approx(min(1.0, 6 * dial["hardest_quartile"]["p"]))
    # Student t with Welch's df: each arm's SD 0.125 over 3 seeds, se = sqrt(2 · 0.125² / 3) = 0.10206,
    # df = 2 · (3 − 1) = 4, t_{0.975, 4} = 2.7764 (tables): 0.25 ± 0.2834
    assert dial["hardest_quartile"]["ci95"] == pytest.approx([0.25 - 0.2834, 0.25 + 0.2834], abs=1e-4)
    assert dial["hardest_quartile"]["df"] == pytest.approx(4) and dial["hardest_quartile"]["seeds"] == [3, 3]
    low, high = dial["hardest_quartile"]["boot95"]  # the bootstrap beside it: resampled means of 3 seeds
    assert 0.25 - 0.25 <= low <= 0.25 <= high <= 0.25 + 0.25
    assert dial["heldout"]["difference"] == pytest.approx(0.01)
    assert study["cells"]["G8-adamw-clip"]["filter-divide"]["heldout"]["difference"] == pytest.approx(0.115)
    assert study["cells"]["G8-adamw-clip"]["norm_ratio"] == pytest.approx(
        {"divide": 1.0, "no_divide": 0.5, "filter": 1.5}
    )
    flat = study["cells"]["G32-sgd-noclip"]["divide-no_divide"]["hardest_quartile"]
    assert flat["difference"] == 0.0 and flat["p"] == 1.0 and "filter-divide" not in study["cells"]["G32-sgd-noclip"]
    assert study["seeds"]["G32-sgd-noclip"] == {"divide": 3, "no_divide": 3}
    values = study["values"]["G8-adamw-clip"]
    assert values["divide"]["hardest_quartile"] == pytest.approx([0.5, 0.625, 0.75])  # in seed order
    assert values["no_divide"]["update_norm"] == pytest.approx([1.0] * 3)  # (0.5 + 1.5) / 2
    assert values["filter"]["grad_above_one"] == pytest.approx([0.5] * 3)
    assert study["start"] == 0.0 and study["hardest_prompts"] == 2  # positions 0 and 6 start at k = 0


@pytest.mark.slow  # the tiny SFT and 33 tiny runs: a minute
def test_every_arm_records_at_the_tiny_size(tmp_path) -> None:
    """The whole pipeline at a toy size: the tiny profile's SFT, the pilot, every arm in an AdamW cell
    and in two SGD cells (G = 8 and 32, clip on and off), recorded as ``record`` records them, then
    read back by the study."""
    cells = [ab.Cell(8, "adamw", True), ab.Cell(8, "sgd", True), ab.Cell(32, "sgd", False)]
    sizes = dict(step_samples=64, run_samples=128, pool_size=16, pool_samples=4, eval_samples=4, max_new_tokens=4)
    out = tmp_path / "out"
    written = record_ablation(TINY, [0], tmp_path / "work", out, cells=cells, allow_dirty=True, **sizes)
    assert len(written) == 9
    for path in written:
        assert sorted(f.name for f in path.iterdir()) == [MARKER, "metrics.jsonl.gz", "provenance.json"]
    provenance, records = load_run(out / "no_divide-G32-sgd-noclip-seed0")
    train = provenance["config"]["train"]
    assert (train["optimizer"], train["max_grad_norm"], train["group_size"], train["prompts_per_step"]) == (
        "sgd",
        0.0,
        32,
        2,
    )
    assert train["recipe"]["scale_std"] is False and records[-1]["samples/generated"] >= 128
    pilot = (out / "pilot.json").read_text()
    assert "no_divide-G32-sgd-noclip" in pilot and (out / "pilot-divide-G32-adamw-noclip-seed0").is_dir()
    chosen = json.loads(pilot)
    assert train["lr"] == pytest.approx(chosen["sgd_lr"]["no_divide-G32-sgd-noclip"], rel=1e-12)
    assert (
        set(chosen["sgd_fraction"]) == {"G8-sgd-clip", "G32-sgd-noclip"} and len(chosen["tuning_pool_accuracy"]) == 16
    )
    assert (out / "pilot-tune3-no_divide-G32-sgd-noclip-seed1000").is_dir()
    study = ab.ablation_study(out, draws=200)
    assert study["comparisons"] == 12  # 3 cells × 2 contrasts × 2 measures
    assert np.isfinite(study["cells"]["G8-adamw-clip"]["divide-no_divide"]["hardest_quartile"]["difference"])
    again = record_ablation(TINY, [0], tmp_path / "work", out, cells=cells, allow_dirty=True, **sizes)
    assert again == written  # finished runs are published again, not rerun
