"""``python -m stddial_book diagnose FILE`` and its functions: a reader's solve-rate table read from CSV, Parquet,
JSONL (or a hub dataset), diagnosed with the package's own closed forms, refused on one line when it is bad, and
written only into a fresh ``--out`` directory."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from stddial_book.cli import main
from stddial_book.core.outdir import MARKER
from stddial_book.corpora.bigmath_figure import load_big_math_histogram
from stddial_book.corpora.histograms import (
    dapo_oversampling,
    decile_shares,
    gradient_budget,
    silent_fraction,
)
from stddial_book.corpora.reader_pool import ReaderDataError, load_reader_pool
from stddial_book.corpora.solve_tables import load_committed_histograms
from stddial_book.experiments.diagnose.report import DEFAULT_GROUP_SIZES, diagnose, diagnosis_text
from stddial_book.theory.recipes import DR_GRPO, GRPO


def _rows(hist) -> dict[str, np.ndarray]:
    k = np.repeat(np.arange(hist.num_rollouts + 1), np.asarray(hist.counts, dtype=np.int64))
    return {"correct": k, "samples": np.full(k.size, hist.num_rollouts)}


def write_table(path: Path, columns: dict) -> Path:
    """``columns`` (name -> values) as a CSV, Parquet or JSONL file, by the suffix of ``path``."""
    if path.suffix == ".jsonl":
        names = list(columns)
        lines = [json.dumps(dict(zip(names, row))) for row in zip(*(np.asarray(columns[c]).tolist() for c in names))]
        path.write_text("\n".join(lines) + "\n")
        return path
    table = pa.table({name: list(values) for name, values in columns.items()})
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        pcsv.write_csv(table, path)
    return path


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): "dir" if p.is_dir() else p.read_bytes().hex()[:64] for p in root.rglob("*")}


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert captured.out == "", captured.out
    return err


# ----------------------------------------------------------------------------------------------------------------
# the numbers: the committed tables, read back from a file, give corpora.histograms' numbers exactly


@pytest.mark.slow  # five committed tables written and read back in three formats: seconds
@pytest.mark.parametrize(
    ("table", "suffix"),
    [
        ("union", ".csv"),
        ("union", ".parquet"),
        ("union", ".jsonl"),
        ("deepscaler_hard_extreme_train", ".csv"),
        ("big_math", ".parquet"),
    ],
)
def test_committed_tables_give_the_histograms_numbers(tmp_path, table: str, suffix: str) -> None:
    hist = load_big_math_histogram() if table == "big_math" else load_committed_histograms()[table]
    path = write_table(tmp_path / f"{table}{suffix}", _rows(hist))
    report = diagnose(load_reader_pool(path))
    sizes = list(DEFAULT_GROUP_SIZES)
    assert report["pool"]["prompts"] == hist.num_prompts
    assert report["pool"]["samples_per_prompt"] == hist.num_rollouts
    closed = silent_fraction(hist, sizes)
    subsampled = silent_fraction(hist, sizes, "hypergeometric")
    draws = dapo_oversampling(hist, sizes)
    for i, g in enumerate(sizes):
        assert report["silent_fraction"][str(g)] == pytest.approx(closed[i], rel=1e-14)
        assert report["silent_fraction_subsampled"][str(g)] == pytest.approx(subsampled[i], rel=1e-14)
        expected = draws[i] if np.isfinite(draws[i]) else None
        assert report["dapo_draws_per_kept_group"][str(g)] == pytest.approx(expected, rel=1e-14)
    mass = report["gradient_mass_by_decile"]
    for recipe in (GRPO, DR_GRPO):
        np.testing.assert_allclose(mass[recipe.name], decile_shares(hist, gradient_budget(hist, recipe)), rtol=1e-14)
    assert report["limits"] == []


def test_a_small_pool_by_hand(tmp_path, monkeypatch) -> None:
    """k of 4 = 0, 1, 2, 4: every number worked out on paper."""
    path = write_table(tmp_path / "pool.csv", {"correct": [0, 1, 2, 4], "samples": [4, 4, 4, 4]})
    report = diagnose(load_reader_pool(path), budget=10, group_sizes=(2, 4, 8))
    # closed form, p = 0, 1/4, 1/2, 1: p^G + (1 - p)^G
    assert report["silent_fraction"]["2"] == pytest.approx((1 + 0.625 + 0.5 + 1) / 4)
    assert report["silent_fraction"]["4"] == pytest.approx((1 + (1 + 81) / 256 + 2 / 16 + 1) / 4)
    # subsampled, 2 of the 4 samples: k = 1 is silent if both drawn are wrong (3 of 6 pairs), k = 2 in 2 of 6 pairs
    assert report["silent_fraction_subsampled"]["2"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1) / 4)
    assert report["silent_fraction_subsampled"]["4"] == pytest.approx(0.5)  # all four: only k = 0 and 4 agree
    assert report["silent_fraction_subsampled"]["8"] is None  # 8 > n = 4 stored samples
    assert any("G <= n = 4" in line for line in report["limits"])
    assert report["dapo_draws_per_kept_group"]["2"] == pytest.approx(1 / (1 - 3.125 / 4))
    law = report["group_size_law"]
    assert law["learnable_prompts"] == 2 and law["median_p"] == pytest.approx(0.375)
    assert law["G_star"] == pytest.approx(1 / (8 * 0.05 * 0.375 * 0.625))
    assert [row["prompts"] for row in law["by_decile"]] == [1, 0, 1, 0, 0, 1, 0, 0, 0, 1]
    assert law["by_decile"][2]["G_star"] == pytest.approx(1 / (8 * 0.05 * 0.25 * 0.75))
    mass = report["gradient_mass_by_decile"]
    assert mass["Dr. GRPO"][2] == pytest.approx(3 / 7) and mass["Dr. GRPO"][5] == pytest.approx(4 / 7)
    root = np.sqrt(0.1875)
    assert mass["GRPO"][2] == pytest.approx(root / (root + 0.5))
    alloc = report["allocation"]
    from stddial_book.rl.allocation import RULES

    assert list(alloc["plans"]) == list(RULES) and "plan_for_rates" in alloc["rules_from"]
    # uniform G = 8: a budget of 10 buys one group of 8, on one prompt
    plan = alloc["plans"]["uniform"]
    assert (plan["samples"], plan["G_max"], plan["prompts_sampled"]) == (8, 8, 1)
    # the oracle spends nothing on p = 0 or 1, where every group is silent: its two groups are at
    # p = 1/4 and 1/2, silent with probability (3/4)^G + (1/4)^G each
    oracle = alloc["plans"]["knapsack_oracle"]
    assert oracle["prompts_sampled"] == 2 and oracle["samples"] == 10
    assert oracle["silent_groups"] == pytest.approx(((3 / 4) ** 6 + (1 / 4) ** 6 + 2 / 2**4) / 2)
    text = diagnosis_text(report)
    assert "pool.csv: 4 prompts" in text and "78.1%" in text


def test_pass_rates_with_and_without_n(tmp_path) -> None:
    counts = write_table(tmp_path / "counts.csv", {"correct": [0, 3, 5, 8, 2], "samples": [8] * 5})
    rates = write_table(tmp_path / "rates.parquet", {"p": [0, 3 / 8, 5 / 8, 1, 2 / 8]})
    by_counts = diagnose(load_reader_pool(counts))
    with_n = diagnose(load_reader_pool(rates, pass_rate="p", samples=8))
    assert with_n["silent_fraction"] == by_counts["silent_fraction"]
    assert with_n["silent_fraction_subsampled"] == by_counts["silent_fraction_subsampled"]
    unknown = diagnose(load_reader_pool(rates, pass_rate="p"))
    for g in ("2", "8", "64"):
        assert unknown["silent_fraction"][g] == pytest.approx(by_counts["silent_fraction"][g], rel=1e-14)
    assert set(unknown["silent_fraction_subsampled"].values()) == {None}
    assert any("unknown" in line for line in unknown["limits"])
    np.testing.assert_allclose(
        unknown["gradient_mass_by_decile"]["GRPO"], by_counts["gradient_mass_by_decile"]["GRPO"], rtol=1e-12
    )


def test_samples_that_vary_by_prompt_pool_each_n(tmp_path) -> None:
    """Prompts with n = 4 and n = 2 samples: each number is the prompt-weighted mean of the two pools'."""
    a = diagnose(load_reader_pool(write_table(tmp_path / "a.csv", {"correct": [0, 1, 3], "samples": [4, 4, 4]})))
    b = diagnose(load_reader_pool(write_table(tmp_path / "b.csv", {"correct": [1, 2], "samples": [2, 2]})))
    both = diagnose(
        load_reader_pool(write_table(tmp_path / "ab.csv", {"correct": [0, 1, 3, 1, 2], "samples": [4, 4, 4, 2, 2]}))
    )
    assert both["pool"]["samples_per_prompt"] == "2 to 4"
    for key in ("silent_fraction", "silent_fraction_subsampled"):
        assert both[key]["2"] == pytest.approx((3 * a[key]["2"] + 2 * b[key]["2"]) / 5)
    assert both["silent_fraction_subsampled"]["4"] is None  # the n = 2 prompts cannot give 4 samples


def test_a_hub_dataset_goes_through_load_dataset(tmp_path, monkeypatch) -> None:
    """The hub path, on a local table of Big-Math's schema (offline machines never reach the hub)."""
    import datasets

    from stddial_book.core import hub

    rates = [0.0, 1 / 64, 0.5, 1.0]
    calls = []

    def fake_load(repo, config=None, split=None):
        calls.append((repo, config, split))
        return datasets.Dataset.from_dict({"llama8b_solve_rate": rates, "source": ["a", "b", "c", "d"]})

    monkeypatch.setattr(hub, "hub_unavailable_reason", lambda *a, **k: None)
    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    pool = load_reader_pool("someone/big-math-like", pass_rate="llama8b_solve_rate", samples=64, config="all")
    assert calls == [("someone/big-math-like", "all", "train")]
    assert pool.num_correct.tolist() == [0, 1, 32, 64] and pool.num_prompts == 4


def test_offline_a_hub_id_fails_at_once_on_one_line(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", "open-r1/Big-Math-RL-Verified-Processed", "--pass-rate", "llama8b_solve_rate"]) == 2
    assert "HF_HUB_OFFLINE is set" in one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_the_allocation_hook_reports_every_rule(monkeypatch) -> None:
    """When rl.allocation exists, each rule of RULES is planned through plan_for_rates (here a stand-in module)."""
    import stddial_book.rl

    fake = types.ModuleType("stddial_book.rl.allocation")
    fake.RULES = {"uniform": None, "greedy": None, "fussy": None}

    def plan_for_rates(rule, solve_rates, budget, rng=None, **options):
        if rule == "fussy":
            raise ValueError("fussy needs more than this")
        sizes = np.zeros(len(solve_rates), dtype=np.int64)
        sizes[0] = budget if rule == "greedy" else 0
        return sizes if rule == "greedy" else np.full(len(solve_rates), budget // len(solve_rates))

    fake.plan_for_rates = plan_for_rates
    monkeypatch.setitem(sys.modules, "stddial_book.rl.allocation", fake)
    monkeypatch.setattr(stddial_book.rl, "allocation", fake, raising=False)
    from stddial_book.corpora.histograms import SolveCounts

    report = diagnose(SolveCounts("toy", np.array([1, 2, 3]), 4), budget=12)
    plans = report["allocation"]["plans"]
    assert set(plans) == {"uniform", "greedy", "fussy"}
    assert plans["greedy"]["G_max"] == 12 and plans["greedy"]["prompts_sampled"] == 1
    assert plans["uniform"]["G_median"] == 4
    assert plans["fussy"] == {"error": "fussy needs more than this"}
    assert "refused: fussy needs more" in diagnosis_text(report)


@pytest.mark.slow  # every rule on a 29,724-prompt pool: seconds; make test runs it, make check leaves it out
def test_every_rule_plans_a_large_pool_on_a_sample() -> None:
    """A pool larger than PLAN_PROMPTS is planned on that many prompts, the budget scaled; every rule answers."""
    from stddial_book.experiments.diagnose.report import PLAN_PROMPTS
    from stddial_book.rl.allocation import RULES

    hist = load_committed_histograms()["union"]
    alloc = diagnose(hist, budget=20 * hist.num_prompts)["allocation"]
    assert alloc["plan_prompts"] == PLAN_PROMPTS and alloc["plan_budget"] == 20 * PLAN_PROMPTS
    assert set(alloc["plans"]) == set(RULES)
    for rule, plan in alloc["plans"].items():
        assert "error" not in plan, (rule, plan)
        assert plan["samples"] <= alloc["plan_budget"] + 1e-9 and not plan["over_budget"], rule


# ----------------------------------------------------------------------------------------------------------------
# the command line


def test_json_holds_the_silent_fractions_by_group_size(tmp_path, monkeypatch, capsys) -> None:
    path = write_table(tmp_path / "pool.parquet", _rows(load_committed_histograms()["union"]))
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert main(["diagnose", str(path), "--json", "--budget", "100000", "--epsilon", "0.1"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in ("silent_fraction", "silent_fraction_subsampled", "dapo_draws_per_kept_group"):
        assert list(report[key]) == [str(g) for g in DEFAULT_GROUP_SIZES]
        assert all(isinstance(v, float) for v in report[key].values())
    assert {"pool", "group_size_law", "gradient_mass_by_decile", "allocation", "limits"} <= set(report)
    assert report["group_size_law"]["epsilon"] == 0.1 and report["allocation"]["budget"] == 100000
    assert snapshot(tmp_path) == before  # no --out: nothing written


def test_the_figure_is_written_only_into_a_fresh_out(tmp_path, monkeypatch, capsys) -> None:
    path = write_table(tmp_path / "pool.csv", {"correct": [0, 3, 5, 8, 2, 7], "samples": [8] * 6})
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(path)]) == 0
    assert "silent groups by G" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.csv"]
    out = tmp_path / "runs" / "diagnosis"
    assert main(["diagnose", str(path), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "diagnose.png", "diagnose.json", "diagnose.txt"])
    assert (out / "diagnose.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "diagnose.json").read_text())["pool"]["prompts"] == 6
    before = snapshot(tmp_path)
    assert main(["diagnose", str(path), "--out", str(out)]) == 2  # never replaced
    assert "already holds diagnose.png" in one_line_error(capsys)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    assert main(["diagnose", str(path), "--out", str(theirs)]) == 2
    assert "not written by stddial_book" in one_line_error(capsys)
    assert snapshot(tmp_path) == before


def _bad_files(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (arguments after ``diagnose``, a phrase the one-line error must hold)."""
    good = {"correct": [1, 2], "samples": [4, 4]}
    w = write_table
    (tmp / "empty.csv").write_text("")
    (tmp / "header.csv").write_text("correct,samples\n")
    (tmp / "array.jsonl").write_text('[{"correct": 1, "samples": 4}]\n')
    (tmp / "garbage.parquet").write_bytes(b"this is no parquet file at all")
    (tmp / "folder.csv").mkdir()
    (tmp / "nan.csv").write_text("correct,samples\n1,4\nnan,4\n")
    (tmp / "blank.csv").write_text("correct,samples\n1,4\n,4\n")
    (tmp / "notes.txt").write_text("correct,samples\n1,4\n")
    return {
        "missing column": ([str(w(tmp / "a.csv", good)), "--correct", "solved"], "no column 'solved'"),
        "missing samples column": ([str(w(tmp / "b.csv", {"correct": [1]}))], "no column 'samples'"),
        "k > n": ([str(w(tmp / "c.csv", {"correct": [1, 5], "samples": [4, 4]}))], "correct = 5 > 4"),
        "k > fixed n": ([str(w(tmp / "c2.csv", {"correct": [1, 5]})), "--samples", "4"], "correct = 5 > 4"),
        "negative": ([str(w(tmp / "d.parquet", {"correct": [1, -1], "samples": [4, 4]}))], "must be >= 0"),
        "NaN": ([str(tmp / "nan.csv")], "NaN"),
        "blank cell": ([str(tmp / "blank.csv")], "empty, NaN"),
        "non-integer": ([str(w(tmp / "e.jsonl", {"correct": [1, 2.5], "samples": [4, 4]}))], "whole counts"),
        "text": ([str(w(tmp / "f.csv", {"correct": ["one", "two"], "samples": [4, 4]}))], "not numbers"),
        "zero samples": ([str(w(tmp / "g.csv", {"correct": [0, 0], "samples": [4, 0]}))], "at least 1"),
        "empty file": ([str(tmp / "empty.csv")], "empty file"),
        "no rows": ([str(tmp / "header.csv")], "holds no rows"),
        "not a table": ([str(tmp / "array.jsonl")], "not a table"),
        "not parquet": ([str(tmp / "garbage.parquet")], "not a table"),
        "unknown suffix": ([str(tmp / "notes.txt")], "unknown file type"),
        "missing file": ([str(tmp / "nowhere.csv")], "does not exist"),
        "a folder": ([str(tmp / "folder.csv")], "is a folder"),
        "rate above 1": ([str(w(tmp / "h.csv", {"p": [0.5, 1.5]})), "--pass-rate", "p"], "in [0, 1]"),
        "rate off the grid": ([str(w(tmp / "i.csv", {"p": [0.5, 0.3]})), "--pass-rate", "p", "--samples", "4"], "1/n"),
        "rate column missing": ([str(w(tmp / "j.csv", {"p": [0.5]})), "--pass-rate", "rate"], "no column 'rate'"),
        "samples column missing": ([str(w(tmp / "k.csv", {"p": [0.5]})), "--pass-rate", "p", "--samples", "n"], "'n'"),
        "epsilon": ([str(w(tmp / "l.csv", good)), "--epsilon", "2"], "epsilon"),
        "budget": ([str(w(tmp / "m.csv", good)), "--budget", "0"], "--budget"),
        "out is the cwd": ([str(w(tmp / "o.csv", good)), "--out", "."], "--out"),
        "out is empty": ([str(w(tmp / "q.csv", good)), "--out", ""], "--out"),
    }


OPTION_CASES = ("epsilon", "budget", "out is the cwd", "out is empty")


@pytest.mark.parametrize(
    "case",
    [
        "missing column",
        "missing samples column",
        "k > n",
        "k > fixed n",
        "negative",
        "NaN",
        "blank cell",
        "non-integer",
        "text",
        "zero samples",
        "empty file",
        "no rows",
        "not a table",
        "not parquet",
        "unknown suffix",
        "missing file",
        "a folder",
        "rate above 1",
        "rate off the grid",
        "rate column missing",
        "samples column missing",
        "epsilon",
        "budget",
        "out is the cwd",
        "out is empty",
    ],
)
def test_bad_input_is_refused_on_one_line_and_nothing_is_written(tmp_path, monkeypatch, capsys, case: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    args, phrase = _bad_files(data)[case]
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    out = [] if "--out" in args else ["--out", str(tmp_path / "new")]
    assert main(["diagnose", *args, *out]) == 2
    message = one_line_error(capsys)
    assert phrase in message, message
    assert snapshot(tmp_path) == before
    if case not in OPTION_CASES:  # the function refuses the same data with the same message
        with pytest.raises(ValueError, match=re.escape(phrase)):
            load_reader_pool(args[0], **_loader_options(args[1:]))


def _loader_options(rest: list[str]) -> dict:
    names = {"--correct": "correct", "--samples": "samples", "--pass-rate": "pass_rate"}
    return {names[flag]: value for flag, value in zip(rest[::2], rest[1::2]) if flag in names}


def test_the_loader_raises_its_own_error_type(tmp_path) -> None:
    with pytest.raises(ReaderDataError, match="no column 'correct'"):
        load_reader_pool(write_table(tmp_path / "x.csv", {"k": [1]}))
    with pytest.raises(TypeError, match="counts must be"):
        diagnose([1, 2, 3])
    with pytest.raises(ValueError, match="group_sizes"):
        diagnose(load_committed_histograms()["union"], group_sizes=(1, 2))


# ----------------------------------------------------------------------------------------------------------------
# per-completion rows, TRL's completion log, the recommendation and the kept ids


def _completions(k: list[int], n: int, ids: list) -> dict[str, list]:
    """One row per completion: prompt i's n completions, its first k[i] correct, the prompts interleaved."""
    rows = [(ids[i], j, int(j < k[i])) for j in range(n) for i in range(len(k))]
    return {"prompt_id": [r[0] for r in rows], "sample_idx": [r[1] for r in rows], "correct": [r[2] for r in rows]}


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_per_completion_rows_are_grouped_per_prompt(tmp_path, suffix: str) -> None:
    """k of 8 = 0, 3, 5, 8 written one completion a row: the same report as the per-prompt table, ids kept in order."""
    k, ids = [0, 3, 5, 8], ["q7", "q2", "q9", "q4"]
    rows = write_table(tmp_path / f"rows{suffix}", _completions(k, 8, ids))
    table = write_table(tmp_path / f"table{suffix}", {"prompt_id": ids, "correct": k, "samples": [8] * 4})
    pool = load_reader_pool(rows)
    assert pool.prompt_ids == ids and pool.id_column == "prompt_id" and "32 completions grouped" in pool.kind
    assert pool.num_correct.tolist() == k and pool.num_samples.tolist() == [8] * 4
    by_rows, by_table = diagnose(pool, budget=64), diagnose(load_reader_pool(table), budget=64)
    assert by_rows["silent_fraction"] == by_table["silent_fraction"]
    assert by_rows["silent_fraction_subsampled"] == by_table["silent_fraction_subsampled"]
    assert by_rows["recommendation"] == by_table["recommendation"]
    assert load_reader_pool(table).prompt_ids == ids


def test_a_trl_completion_log_folder_is_read_as_trl_writes_it(tmp_path, monkeypatch, capsys) -> None:
    """TRL's ``GRPOTrainer.log`` table (step, prompt, completion, a column per reward function, advantage), written
    with pandas' ``to_parquet`` into ``completions/completions_NNNNN.parquet``: conversational prompts grouped,
    the one 0/1 reward found, a None reward left out and said so, the steps pooled and said so."""
    pd = pytest.importorskip("pandas")
    folder = tmp_path / "out" / "completions"
    folder.mkdir(parents=True)
    questions = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(3)]
    solved = {0: [1.0, 1.0, 1.0, 1.0], 1: [1.0, 0.0, 0.0, None], 2: [0.0, 0.0, 0.0, 0.0]}
    for step in (1, 2):
        prompts, rewards = [], []
        for i in (0, 1) if step == 1 else (1, 2):
            prompts += [questions[i]] * 4
            rewards += solved[i] if step == 1 or i == 2 else [1.0, 1.0, 0.0, 0.0]
        table = {
            "step": [step] * len(prompts),
            "prompt": prompts,
            "completion": [[{"role": "assistant", "content": "4"}]] * len(prompts),
            "accuracy_reward": rewards,
            "format_reward": [0.5] * len(prompts),
            "advantage": [0.0] * len(prompts),
        }
        pd.DataFrame(table).to_parquet(folder / f"completions_{step:05d}.parquet")
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(folder), "--json", "--kept-ids", "kept.jsonl"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pool"]["prompts"] == 3 and report["pool"]["prompt_column"] == "prompt"
    assert "reward 'accuracy_reward'" in report["pool"]["input"]
    assert report["pool"]["samples_per_prompt"] == "4 to 7"  # prompt 1: 3 + 4 rewards, one None left out
    assert any("1 completions have no reward" in line for line in report["limits"])
    assert any("2 logged steps" in line for line in report["limits"])
    kept = [json.loads(line) for line in (tmp_path / "kept.jsonl").read_text(encoding="utf-8").splitlines()]
    assert kept == [questions[1]]  # 3 of 7 correct: the only prompt with 0 < p < 1, as TRL's message list


def test_the_recommendation_by_hand(tmp_path) -> None:
    """k of 4 = 0, 1, 2, 4: prune the first and the last; G* = 1/(8 · 0.05 · 0.375 · 0.625) = 10.7 at the kept
    prompts' median p = 3/8, so G = 11; the bound on a never-solved prompt's p is 1 − 0.05^(1/4)."""
    pool = load_reader_pool(
        write_table(tmp_path / "pool.csv", {"id": [1, 2, 3, 4], "correct": [0, 1, 2, 4], "samples": [4] * 4})
    )
    rec = diagnose(pool)["recommendation"]
    assert (rec["prune_never_solved"], rec["prune_always_solved"], rec["kept_prompts"]) == (1, 1, 2)
    assert rec["G_star"] == pytest.approx(1 / (8 * 0.05 * 0.375 * 0.625)) and rec["group_size"] == 11
    kept_silent = ((0.25**11 + 0.75**11) + 2 * 0.5**11) / 2
    assert rec["silent_kept"] == pytest.approx(kept_silent)
    assert rec["silent_whole_pool"] == pytest.approx((2 + 2 * kept_silent) / 4)
    assert rec["pruned_at_n"] == 4 and rec["pruned_p_bound"] == pytest.approx(1 - 0.05 ** (1 / 4))
    text = " ".join(diagnosis_text(diagnose(pool)).split())  # the report wraps at 78 columns
    assert "prune 2 of 4 prompts (50.0%)" in text and "G = 11 for the kept prompts" in text
    assert "may still have p up to 0.53" in text and "may be learnable" in text
    from stddial_book.experiments.diagnose.advice import kept_ids

    assert kept_ids(pool) == [2, 3]


def test_the_allocation_block_compares_rules_in_generated_samples(tmp_path) -> None:
    """DAPO, given a batch that can spend the budget, spends it (not a few percent at a median of half a sample),
    and every rule reports spent and live samples per budget sample."""
    rng = np.random.default_rng(3)
    k = rng.binomial(8, rng.beta(0.7, 0.7, 200))
    path = write_table(tmp_path / "pool.csv", {"correct": k, "samples": [8] * k.size})
    alloc = diagnose(load_reader_pool(path), budget=1600)["allocation"]
    plans = alloc["plans"]
    assert "generated samples" in alloc["unit"] and alloc["settings"]["dapo"] == {"batch_prompts": 200}
    for rule, plan in plans.items():
        assert 0 <= plan["live_share"] <= plan["generated_share"] <= 1 + 1e-9, rule
    assert plans["dapo"]["generated_share"] > 0.95 and plans["dapo"]["G_median"] == 8
    assert plans["dapo"]["live_share"] == pytest.approx(plans["uniform"]["live_share"], abs=0.03)
    text = " ".join(diagnosis_text(diagnose(load_reader_pool(path), budget=1600)).split())
    assert "allocation of 1,600 generated samples (as stated)" in text and "live" in text


def test_kept_ids_go_into_a_new_file_only(tmp_path, monkeypatch, capsys) -> None:
    path = write_table(tmp_path / "pool.csv", {"prompt_id": ["a", "b", "c"], "correct": [0, 3, 8], "samples": [8] * 3})
    monkeypatch.chdir(tmp_path)
    assert main(["diagnose", str(path), "--kept-ids", "kept.jsonl"]) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "kept.jsonl").read_text() == '"b"\n'
    before = snapshot(tmp_path)
    cases = {  # refused on one line, before anything is written (--out included)
        "already exists": [str(path), "--kept-ids", "kept.jsonl", "--out", "new"],
        "does not exist": [str(path), "--kept-ids", "nowhere/kept.jsonl", "--out", "new"],
        "no column naming its prompts": [
            str(write_table(tmp_path / "plain.csv", {"correct": [1], "samples": [4]})),
            "--kept-ids",
            "k.jsonl",
        ],
    }
    before = snapshot(tmp_path)
    for phrase, args in cases.items():
        assert main(["diagnose", *args]) == 2
        assert phrase in one_line_error(capsys)
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "case, phrase",
    [
        ("not 0/1", "not a 0/1 reward"),
        ("two 0/1 rewards", "all hold 0/1 rewards"),
        ("no prompt column", "--prompt COL"),
        ("one sample a row", "look like completions"),
        ("empty prompt", "is empty in row 2"),
        ("reward column missing", "no column 'ok'"),
    ],
)
def test_per_completion_input_is_refused_on_one_line(tmp_path, monkeypatch, capsys, case: str, phrase: str) -> None:
    w = write_table
    files = {
        "not 0/1": ([str(w(tmp_path / "a.csv", {"prompt": ["x", "x"], "reward": [1.0, 0.5]}))], {}),
        "two 0/1 rewards": ([str(w(tmp_path / "b.parquet", {"prompt": ["x", "x"], "r1": [1, 0], "r2": [0, 1]}))], {}),
        "no prompt column": ([str(w(tmp_path / "c.csv", {"correct": [1, 0]})), "--rows", "completions"], {}),
        "one sample a row": ([str(w(tmp_path / "d.csv", {"id": [1, 1], "correct": [1, 0]})), "--samples", "1"], {}),
        "empty prompt": ([str(w(tmp_path / "e.parquet", {"prompt": ["x", None, "x"], "correct": [1, 0, 1]}))], {}),
        "reward column missing": (
            [str(w(tmp_path / "f.csv", {"prompt": ["x", "x"], "correct": [1, 0]})), "--reward", "ok"],
            {},
        ),
    }
    args, _ = files[case]
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    assert main(["diagnose", *args, "--out", "new"]) == 2
    assert phrase in one_line_error(capsys)
    assert snapshot(tmp_path) == before


def test_repeated_ids_in_a_per_prompt_table_warn(tmp_path, capsys) -> None:
    path = write_table(tmp_path / "pool.csv", {"prompt_id": [1, 1, 2], "correct": [1, 2, 3], "samples": [4] * 3})
    report = diagnose(load_reader_pool(path))
    assert report["pool"]["prompts"] == 3 and "names 2 prompts in 3 rows" in report["warnings"][0]
    assert "warning: column 'prompt_id' names 2 prompts in 3 rows" in " ".join(diagnosis_text(report).split())
