"""Chapter 15's recorded SmolLM2 runs (data/runs/smollm2): the shipped summary recomputes from the logs, the
runs are what the plan says, and the study's statistics agree with scipy and with cases worked by hand."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import plan_precedes, same_summary
from scipy import stats

from stddial_book.core.resources import data_path
from stddial_book.experiments.smollm2 import study as study_mod
from stddial_book.experiments.smollm2.study import (
    choose_learning_rate,
    load_study,
    paired_test,
    silent_persistence,
    welch_test,
    write_study,
)

RECORDING = data_path("runs", "smollm2", "recording")
HAVE_LOGS = RECORDING.is_dir()  # the logs stay in the repository; a wheel install has only the summary
logs_only = pytest.mark.skipif(not HAVE_LOGS, reason="the recorded logs are in the repository only")


@logs_only
def test_the_shipped_summary_recomputes_from_the_logs(tmp_path):
    fresh = write_study(RECORDING, tmp_path / "study.json.gz")
    same_summary(load_study(fresh), load_study())


@logs_only
def test_the_runs_are_what_the_plan_says():
    shipped = load_study()
    assert shipped["recipes"] == ["grpo", "dr_grpo", "dapo"] and shipped["seeds"] == [0, 1, 2]
    assert shipped["steps"] == 40 and len(shipped["runs"]) == 9
    assert len(shipped["commits"]) == 1
    for run in sorted((RECORDING / "main").iterdir()) + sorted((RECORDING / "pilot").iterdir()):
        prov = json.loads((run / "provenance.json").read_text())
        assert prov["git_commit"] == shipped["commits"][0] and prov["dirty"] is False
        assert prov["precision"]["dtype"] == "float32"
        assert prov["config"]["run"]["max_steps"] == 40 and prov["config"]["run"]["model_id"] == "smollm2"
        assert prov["inputs_sha256"]["dataset"] == _sha("pool_train.jsonl")
        assert prov["inputs_sha256"]["eval_file"] == _sha("pool_heldout.jsonl")
        # a run names a GPU only if it ran on one, and then the provenance's device is that GPU
        assert (prov["gpu"] is None) == (not prov["device"].startswith("NVIDIA"))
        with gzip.open(run / "metrics.jsonl.gz", "rt") as handle:
            steps = [json.loads(line)["step"] for line in handle]
        assert steps == list(range(1, 41))
    driver = json.loads((RECORDING / "driver.json").read_text())
    curves = {float(k): v for k, v in driver["pilot"]["curves"].items()}
    assert choose_learning_rate(curves) == driver["pilot"]["chosen_learning_rate"] == shipped["pilot"]["chosen"]
    for run in shipped["runs"]:
        prov = json.loads((RECORDING / "main" / f"{run['recipe']}-seed{run['seed']}" / "provenance.json").read_text())
        assert prov["config"]["run"]["learning_rate"] == shipped["pilot"]["chosen"]


@logs_only
def test_the_runs_descend_from_the_plan():
    """The plan was committed before the runs: its commit is an ancestor of the runs' commit (needs git and the
    repository's history; CI's clone has both)."""
    commit = load_study()["commits"][0]
    assert plan_precedes("data/runs/smollm2/PLAN.md", commit), (
        f"the runs' commit {commit[:10]} does not descend from the plan's"
    )


def _sha(name: str) -> str:
    import hashlib

    return hashlib.sha256(data_path("smollm2", name).read_bytes()).hexdigest()


def test_paired_and_welch_tests_agree_with_scipy():
    rng = np.random.default_rng(3)
    before, after = rng.normal(0.2, 0.02, 5), rng.normal(0.7, 0.05, 5)
    got = paired_test(before, after, comparisons=3)
    t = stats.ttest_rel(after, before)
    assert got["p_adjusted"] == pytest.approx(min(1.0, 3 * t.pvalue))
    half = stats.t.ppf(1 - 0.05 / 6, 4) * np.std(after - before, ddof=1) / np.sqrt(5)
    assert (got["low"], got["high"]) == pytest.approx((np.mean(after - before) - half, np.mean(after - before) + half))
    with pytest.raises(ValueError, match="one value per seed on each side.*got 2 after and 3 before"):
        paired_test(before[:3], after[:2])  # a recipe short of a seed: no pairs to form
    a, b = rng.normal(0.8, 0.05, 3), rng.normal(0.7, 0.01, 4)
    got = welch_test(a, b, comparisons=3)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert got["p_adjusted"] == pytest.approx(min(1.0, 3 * ref.pvalue))
    assert got["df"] == pytest.approx(ref.df)
    interval = ref.confidence_interval(confidence_level=1 - 0.05 / 3)
    assert (got["low"], got["high"]) == pytest.approx((interval.low, interval.high))


def test_a_test_without_seed_spread_has_no_p_not_p_one():
    """Three seeds with the same rise (no spread) or two samples without spread: no t statistic, so the adjusted
    p is NaN, not the 1.0 that ``min(1.0, nan)`` gives (which would read as a non-detection)."""
    assert math.isnan(paired_test([0.25, 0.5, 0.75], [0.5, 0.75, 1.0], comparisons=3)["p_adjusted"])
    assert math.isnan(welch_test([0.5, 0.5, 0.5], [0.5, 0.5, 0.5], comparisons=3)["p_adjusted"])
    assert paired_test([0.1, 0.2, 0.3], [0.3, 0.45, 0.5], comparisons=3)["p_adjusted"] < 1.0


def test_minimum_detectable_difference_has_the_stated_power():
    """At the reported MDE a simulated paired t test (scipy's) rejects in 80% of experiments."""
    sd, n, alpha = 0.05, 3, 0.05 / 3
    mde = study_mod._mde(sd, n, n - 1, alpha)
    rng = np.random.default_rng(0)
    diffs = rng.normal(mde, sd, size=(40_000, n))
    rejected = stats.ttest_1samp(diffs, 0.0, axis=1).pvalue < alpha
    assert rejected.mean() == pytest.approx(0.8, abs=0.01)


def test_persistence_counts_by_hand():
    before = [{"prompt_id": i, "correct": c, "samples": 4} for i, c in enumerate([0, 0, 0, 4, 2])]
    after = [{"prompt_id": i, "correct": c, "samples": 4} for i, c in enumerate([0, 3, 0, 1, 4])]
    got = silent_persistence(before, after)
    assert got["never"] == {"before": 3, "stayed": 2, "share": 2 / 3}
    assert got["always"] == {"before": 1, "stayed": 0, "share": 0.0}


def test_remeasured_silence_against_counting_every_split():
    """By hand on a tiny case: 8 stored draws, two measurements of 2. A question with 1 right of 8 is silent in
    the first two draws with probability C(7,2)/C(8,2) = 21/28, and in the first four with C(7,4)/C(8,4) =
    35/70; a never-solved one always; one with 4 of 8 with C(4,2)/C(8,2) = 6/28 and C(4,4)/C(8,4) = 1/70.
    Also against enumerating every ordering of the stored draws, and refused without two disjoint draws."""
    from itertools import permutations

    from stddial_book.experiments.smollm2.study import remeasured_silence

    got = remeasured_silence([1, 0, 4], samples=8, draw=2)
    assert got["before"] == pytest.approx(21 / 28 + 1 + 6 / 28)
    assert got["stayed"] == pytest.approx(35 / 70 + 1 + 1 / 70)
    orders = list(permutations([1, 0, 0, 0, 0, 0]))  # k = 1 of n = 6, draws of 2 (distinct orderings suffice)
    first = np.mean([sum(o[:2]) == 0 for o in orders])
    both = np.mean([sum(o[:4]) == 0 for o in orders])
    small = remeasured_silence([1], samples=6, draw=2)
    assert (small["before"], small["stayed"]) == pytest.approx((first, both))
    with pytest.raises(ValueError, match="two disjoint draws"):
        remeasured_silence([1], samples=6, draw=4)


def test_the_study_reads_the_bands_the_callback_logs():
    from stddial_book.bridges.lm_diagnostics import PASS_RATE_BANDS

    assert tuple(study_mod.MASS_BANDS) == tuple(PASS_RATE_BANDS)


def test_the_base_measurement_under_both_verifiers_is_what_measure_wrote():
    """data/smollm2/measured: the table and the record agree, the questions are the committed held-out file,
    and it came from a clean commit."""
    import csv
    import hashlib

    record = json.loads(gzip.decompress(data_path("smollm2", "measured", "heldout.json.gz").read_bytes()))
    with open(data_path("smollm2", "measured", "heldout.csv"), newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [r["prompt_id"] for r in table] == [r["prompt_id"] for r in record["rows"]]
    for row, rec in zip(table, record["rows"]):
        assert int(row["correct"]) == rec["correct"] == rec["correct_by"]["last-number"]
        assert int(row["correct_math_verify"]) == rec["correct_by"]["math-verify"]
        assert int(row["samples"]) == rec["samples"] == record["settings"]["samples"]
    held = data_path("smollm2", "pool_heldout.jsonl").read_bytes()
    assert record["settings"]["prompts_sha256"] == hashlib.sha256(held).hexdigest()
    assert len(table) == len(held.splitlines())
    assert record["provenance"]["dirty"] is False and len(record["provenance"]["git_commit"]) == 40


def test_each_recipes_pilot_is_read_from_its_own_folders(tmp_path) -> None:
    """The strict plan (data/runs/smollm2/PLAN-strict.md): every recipe pilots its own rate; the first plan's
    lr<rate>/ folders are GRPO's."""
    from stddial_book.experiments.smollm2.study import pilot_curves

    def run(folder: Path, rates: list[float]) -> None:
        folder.mkdir(parents=True)
        with gzip.open(folder / "metrics.jsonl.gz", "wt", encoding="utf-8") as handle:
            for step, rate in enumerate(rates, 1):
                handle.write(json.dumps({"step": step, "dial/pass_rate": rate}) + "\n")

    strict, first = tmp_path / "strict", tmp_path / "first"
    run(strict / "grpo-lr1e-4", [0.1, 0.2])
    run(strict / "dr_grpo-lr1e-4", [0.3])
    run(strict / "dapo-lr3e-4", [0.5, 0.6])
    assert pilot_curves(strict) == {
        "grpo": {"1e-4": [0.1, 0.2]},
        "dr_grpo": {"1e-4": [0.3]},
        "dapo": {"3e-4": [0.5, 0.6]},
    }
    run(first / "lr1e-3", [0.4])
    assert pilot_curves(first) == {"grpo": {"1e-3": [0.4]}}
    run(tmp_path / "none" / "dapo-lr1e-3", [0.4])
    with pytest.raises(ValueError, match="no GRPO pilot"):
        pilot_curves(tmp_path / "none")


def test_accuracy_under_both_verifiers_on_the_same_completions() -> None:
    from stddial_book.experiments.smollm2.study import accuracy_by_verifier

    rows = [
        {"prompt_id": "a", "correct": 2, "samples": 4, "correct_by": {"math-verify": 4, "last-number": 2}},
        {"prompt_id": "b", "correct": 0, "samples": 4, "correct_by": {"math-verify": 2, "last-number": 0}},
    ]
    assert accuracy_by_verifier(rows) == pytest.approx(
        {"math-verify": 6 / 8, "last-number": 2 / 8, "strict_over_lenient": 2 / 6}
    )
    assert accuracy_by_verifier([{"prompt_id": "a", "correct": 1, "samples": 2}]) == {}


def test_kept_completions_are_read_by_question() -> None:
    from stddial_book.experiments.smollm2.study import kept_completions

    rows = [
        {"prompt_id": "a", "correct": 1, "samples": 2, "examples": ["5 + 8 = 13.", "13"]},
        {"prompt_id": "b", "correct": 0, "samples": 2, "examples": []},
        {"prompt_id": "c", "correct": 0, "samples": 2},  # the first recording kept none
    ]
    assert kept_completions(rows) == {"a": ["5 + 8 = 13.", "13"]}


@logs_only
def test_the_kept_completions_token_counts_are_recorded_by_question(tmp_path) -> None:
    """Recorded runs given kept completions: with a counter, each run of the first seed records one count per
    kept completion, shaped like the completions (here a word count, by hand: 5 and 1); without one, no counts.
    A later seed's run keeps neither in the summary (its log holds its completions)."""
    from stddial_book.experiments.smollm2.study import lm_study

    with gzip.open(RECORDING / "main" / "grpo-seed0" / "eval.json.gz", "rt") as handle:
        evals = json.load(handle)
    first = evals["after"]["heldout"][0]["prompt_id"]
    evals["after"]["heldout"][0]["examples"] = ["5 + 8 = 13", "13"]
    for seed in (0, 1):
        src = RECORDING / "main" / f"grpo-seed{seed}"
        run = tmp_path / "main" / f"grpo-seed{seed}"
        run.mkdir(parents=True)
        for name in ("metrics.jsonl.gz", "provenance.json"):
            (run / name).write_bytes((src / name).read_bytes())
        with gzip.open(run / "eval.json.gz", "wt") as handle:
            json.dump(evals, handle)
    counted, later = lm_study(tmp_path / "main", count_tokens=lambda text: len(text.split()))["runs"]
    assert (counted["seed"], later["seed"]) == (0, 1)
    assert counted["heldout_examples"] == {"before": {}, "after": {first: ["5 + 8 = 13", "13"]}}
    assert counted["heldout_example_tokens"] == {"before": {}, "after": {first: [5, 1]}}
    assert "heldout_examples" not in later and "heldout_example_tokens" not in later
    assert "heldout_example_tokens" not in lm_study(tmp_path / "main")["runs"][0]


@logs_only
def test_the_summary_names_where_the_pilots_ran() -> None:
    shipped = load_study()
    provs = [json.loads(p.read_text()) for p in sorted((RECORDING / "pilot").glob("*/provenance.json"))]
    assert len(provs) == 3 and shipped["pilot_devices"] == sorted({p["device"] for p in provs})
    assert shipped["pilot_seeds"] == sorted({p["seed"] for p in provs})  # the seed the pilot figure names
    assert shipped["pilot_commits"] == shipped["commits"]  # the first plan's pilots ran from the runs' commit
    assert all("heldout_examples" not in run for run in shipped["runs"])  # it kept no completions
    assert load_study(study_mod.STUDY_FILE) == shipped


def test_a_pool_table_is_read_with_every_verifiers_count(tmp_path) -> None:
    """The columns `measure` writes (the chosen verifier's count, then each verifier's on the same completions);
    a table of the first recording, without the per-verifier columns, has no ``correct_by``."""
    from stddial_book.bridges.lm_rewards import VERIFIERS
    from stddial_book.corpora.measured_pool import verifier_column
    from stddial_book.experiments.smollm2.study import read_pool_counts

    header = ["prompt_id", "correct", "samples", *(verifier_column(v) for v in VERIFIERS)]
    by = {"math-verify": [12, 30], "last-number": [1, 20]}
    lines = [",".join(header)] + [
        ",".join(map(str, [pid, by["last-number"][i], 64, *(by[v][i] for v in VERIFIERS)]))
        for i, pid in enumerate(["1d+1d-000", "1d+1d-001"])
    ]
    (tmp_path / "pool.csv").write_text("\n".join(lines) + "\n")
    counts = read_pool_counts(tmp_path / "pool.csv")
    assert counts == {"prompt_id": ["1d+1d-000", "1d+1d-001"], "correct": [1, 20], "samples": [64], "correct_by": by}
    (tmp_path / "old.csv").write_text("prompt_id,correct,samples\na,3,64\n")
    assert read_pool_counts(tmp_path / "old.csv") == {"prompt_id": ["a"], "correct": [3], "samples": [64]}


def test_the_pilot_figure_draws_a_panel_per_piloting_recipe() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from stddial_book.presentation.lm_figures import lm_pilot_figure

    curve = {"0.0001": [0.1] * 12, "0.0003": [0.5] * 12}
    pilot = {"curves": curve, "chosen": 3e-4, "window": 10}
    fig = lm_pilot_figure({"pilots": {"dapo": pilot, "grpo": pilot, "dr_grpo": pilot}, "pilot_seeds": [100]})
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["GRPO pilot, seed 100", "Dr. GRPO pilot, seed 100", "DAPO pilot, seed 100"]
    assert [line.get_linewidth() for line in fig.axes[0].get_lines()] == [1.3, 2.5]  # the chosen rate drawn thick
    study = load_study()
    first = lm_pilot_figure(study)
    assert len(first.axes) == 1  # the first plan: GRPO piloted alone
    assert first.axes[0].get_title() == f"GRPO pilot, seed {study['pilot_seeds'][0]}"  # the pilots' own seed
    assert lm_pilot_figure({"pilot": pilot}).axes[0].get_title() == "GRPO pilot"  # no seed recorded, none named


def test_the_run_figures_name_the_runs_seeds_and_group_size() -> None:
    """The titles read the summary's seed count and G, and the cap's label sits at the last step: on the first
    recording's summary (3 seeds, G = 8, 40 steps) and on a copy claiming 5 seeds and G = 16."""
    import matplotlib

    matplotlib.use("Agg")
    from stddial_book.presentation.lm_figures import lm_dial_figure, lm_learning_figure

    study = load_study()
    assert lm_learning_figure(study).axes[0].get_title() == "Reward per step (3 seeds: mean and range)"
    assert lm_learning_figure(study).axes[1].texts[0].get_position()[0] == study["steps"] == 40
    other = {**study, "seeds": [0, 1, 2, 3, 4], "group_size": 16}
    assert lm_learning_figure(other).axes[0].get_title() == "Reward per step (5 seeds: mean and range)"
    titles = [ax.get_title() for ax in lm_dial_figure(other, {"wrong": 0.7, "right": 0.0}).axes]
    assert titles[:2] == ["Groups silent because all G = 16 failed", "Groups silent because all G = 16 passed"]


def test_band_counts_by_hand() -> None:
    """The bands [0, 1/4], (1/4, 1/2], (1/2, 3/4], (3/4, 1] as counts of G right: G = 8, 4 and 2 (where no count
    falls in (1/2, 3/4])."""
    from stddial_book.bridges.lm_diagnostics import band_counts

    assert band_counts(8) == [(0, 2), (3, 4), (5, 6), (7, 8)]
    assert band_counts(4) == [(0, 1), (2, 2), (3, 3), (4, 4)]
    assert band_counts(2) == [(0, 0), (1, 1), (-1, -1), (2, 2)]


def test_the_dial_figure_labels_each_band_by_the_counts_its_mass_comes_from() -> None:
    """The mass panel's ticks name the k of G right in each band; a single group of each k, its mass binned by the
    callback's own diagnostics, lands in the band whose label holds that k (G = 8 and G = 6); the predictions are
    one point each, at step 1."""
    import matplotlib

    matplotlib.use("Agg")
    from stddial_book.bridges.lm_diagnostics import batch_diagnostics
    from stddial_book.presentation.lm_figures import lm_dial_figure

    study = load_study()
    for G in (8, 6):
        fig = lm_dial_figure({**study, "group_size": G}, {"wrong": 0.7, "right": 0.1})
        labels = [t.get_text() for t in fig.axes[2].get_xticklabels()]
        for k in range(1, G):  # a silent group carries no mass under the verifier's reward
            passed = [1] * k + [0] * (G - k)
            adv = [1.0 if p else -1.0 for p in passed]
            mass = batch_diagnostics(passed, passed, adv, group_size=G, recipe="grpo")["mass_by_band"]
            low, _, high = labels[int(np.argmax(mass))].removeprefix("k = ").partition("–")
            assert int(low) <= k <= int(high or low), (G, k, labels)
        assert [line.get_xydata().tolist() for line in fig.axes[0].lines if line.get_marker() == "D"] == [[[1.0, 0.7]]]


def test_sigma_shares_by_hand() -> None:
    """G = 4: k = 0..4 give σ = 0, √3/4, 1/2, √3/4, 0. Two steps with 1 group at k = 0, 2 at k = 1, 1 at k = 2, and
    1 at k = 3, 1 at k = 4, 2 at k = 2: 8 groups, σ = 0 twice (2/8), √3/4 three times (3/8), 1/2 three times (3/8)."""
    from stddial_book.experiments.smollm2.study import sigma_shares

    shares = sigma_shares([[1, 2, 1, 0, 0], [0, 0, 2, 1, 1]])
    assert list(shares) == pytest.approx([0.0, math.sqrt(3) / 4, 0.5])
    assert list(shares.values()) == pytest.approx([2 / 8, 3 / 8, 3 / 8])


def test_sigma_shares_for_odd_g_and_refusals() -> None:
    """G = 3: k = 0..3 give σ = 0, √2/3, √2/3, 0; one group each: half at 0, half at √2/3 (not 1/2)."""
    from stddial_book.experiments.smollm2.study import sigma_shares

    assert sigma_shares([[1, 1, 1, 1]]) == pytest.approx({0.0: 0.5, round(math.sqrt(2) / 3, 12): 0.5})
    for bad in ([], [[1]], [[1, 2], [1, 2, 3]], [[0, 0, 0]]):
        with pytest.raises(ValueError):
            sigma_shares(bad)


def test_the_sigma_figure_pools_each_recipes_seeds_over_its_first_and_last_steps() -> None:
    """On the first recording's summary (G = 8: five values of σ, so five bars a recipe): GRPO's σ = 0 bar over the
    first ten steps is the share of silent groups in its three seeds' first ten steps, counted here from the
    logged k counts (k = 0 or 8), and equals the logged silent fraction; the bars of each recipe sum to 1."""
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    from stddial_book.presentation.lm_figures import lm_sigma_figure

    study = load_study()
    fig = lm_sigma_figure(study)
    assert [ax.get_title() for ax in fig.axes] == ["The first 10 steps", "The last 10 steps"]
    values = study["group_size"] // 2 + 1
    for ax, part in zip(fig.axes, (slice(0, 10), slice(-10, None))):
        for i, recipe in enumerate(study["recipes"]):
            bars = ax.patches[i * values : (i + 1) * values]
            runs = [run for run in study["runs"] if run["recipe"] == recipe]
            rows = [row for run in runs for row in run["k_counts"][part]]
            silent = sum(row[0] + row[-1] for row in rows) / sum(sum(row) for row in rows)
            assert bars[0].get_height() == pytest.approx(silent)
            assert silent == pytest.approx(np.mean([run["curves"]["silent_fraction"][part] for run in runs]))
            assert sum(b.get_height() for b in bars) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="half the shortest run"):
        lm_sigma_figure(study, window=21)
    plt.close("all")


def test_predicted_silence_by_hand_and_by_enumeration():
    """G of n stored draws: all wrong with C(n − k, G)/C(n, G), all right with C(k, G)/C(n, G), averaged over the
    pool; checked by hand (n = 4, G = 2) and by enumerating every G-subset of the draws."""
    from itertools import combinations as subsets

    from stddial_book.experiments.smollm2.study import predicted_silence

    got = predicted_silence([0, 1, 2, 4], samples=4, group_size=2)
    # k = 0: wrong 1; k = 1: wrong C(3,2)/C(4,2) = 1/2; k = 2: wrong 1/6, right 1/6; k = 4: right 1
    assert got["wrong"] == pytest.approx((1 + 1 / 2 + 1 / 6 + 0) / 4)
    assert got["right"] == pytest.approx((0 + 0 + 1 / 6 + 1) / 4)
    assert got["silent"] == pytest.approx(got["wrong"] + got["right"])
    draws = [1, 0, 1, 1, 0, 0, 1]  # one question, k = 4 of n = 7, G = 3
    groups = list(subsets(draws, 3))
    enumerated = sum(sum(g) in (0, 3) for g in groups) / len(groups)
    assert predicted_silence([4], samples=7, group_size=3)["silent"] == pytest.approx(enumerated)
    for bad in ({"samples": 4, "group_size": 5}, {"samples": 4, "group_size": 0}):
        with pytest.raises(ValueError, match="group size"):
            predicted_silence([1], **bad)


def test_predicted_silence_is_the_teaching_pool_silent_fraction() -> None:
    """The study's split (all wrong, all right) sums to the teaching version chapters 5 and 7 show (``math.comb``
    ratios, G of the n stored draws) on seeded random pools, and each side is that version's own term."""
    import math

    from stddial_book.experiments.smollm2.study import predicted_silence
    from stddial_book.teaching.silent_fraction import pool_silent_fraction

    rng = np.random.default_rng(15)
    for _ in range(40):
        n = int(rng.integers(1, 70))
        k = rng.binomial(n, rng.beta(0.5, 0.5, size=int(rng.integers(1, 300))))
        G = int(rng.integers(1, n + 1))
        got = predicted_silence(k, samples=n, group_size=G)
        assert got["silent"] == pytest.approx(pool_silent_fraction(k, n, G, subsample=True), rel=1e-9, abs=1e-12)
        wrong = np.mean([math.comb(n - int(j), G) / math.comb(n, G) for j in k])
        assert got["wrong"] == pytest.approx(wrong, rel=1e-9, abs=1e-12)


def test_step_seconds_by_hand() -> None:
    """Differences of the callback's elapsed time; the first step, and the first after a resume (the clock starts
    again), count from the process's start."""
    from stddial_book.experiments.smollm2.study import step_seconds

    assert step_seconds([50.0, 110.0, 165.0, 60.0, 118.0]) == pytest.approx([50.0, 60.0, 55.0, 60.0, 58.0])


def test_bad_counts_and_pools_that_do_not_line_up_are_refused() -> None:
    from stddial_book.experiments.smollm2 import study

    for counts in ([1, 5], [1, -1], [1.5]):
        with pytest.raises(ValueError, match="whole number from 0 to samples=4"):
            study.predicted_silence(counts, samples=4, group_size=2)
    before = {"pool": [{"prompt_id": "a", "correct": 1, "samples": 4}, {"prompt_id": "b", "correct": 0, "samples": 4}]}
    assert study._pool_correct(before, before) == {"before": [1, 0], "after": [1, 0], "samples": 4}
    for after in (
        {"pool": before["pool"][::-1]},
        {"pool": []},
        {"pool": [{**r, "samples": 8} for r in before["pool"]]},
    ):
        with pytest.raises(ValueError, match="other questions or draw counts"):
            study._pool_correct(before, after)


def test_welchs_detectable_difference_has_the_stated_power_with_unequal_seeds() -> None:
    """At the detectable difference reported for 3 against 3 seeds and for 3 against 5 of unequal spread, scipy's
    Welch test at the Bonferroni level rejects in 80% of simulated experiments with those spreads (fresh draws, not
    the study's own); the noncentral t at the observed degrees of freedom, the shortcut it replaces, falls short."""
    rng = np.random.default_rng(7)
    for n_b, spread_b in ((3, 0.05), (5, 0.02)):
        a, b = rng.normal(0.5, 0.06, 3), rng.normal(0.5, spread_b, n_b)
        got = welch_test(a, b, comparisons=3)
        sa, sb = a.std(ddof=1), b.std(ddof=1)
        x = rng.normal(got["mde"], sa, size=(40_000, 3))
        y = rng.normal(0.0, sb, size=(40_000, n_b))
        rejected = stats.ttest_ind(x, y, axis=1, equal_var=False).pvalue < 0.05 / 3
        assert rejected.mean() == pytest.approx(0.8, abs=0.015)
    shortcut = study_mod._mde(math.sqrt(sa**2 / 3 + sb**2 / 5), 1.0, got["df"], 0.05 / 3)
    assert shortcut < got["mde"]
