"""Solve-count tables: curves against per-row computation and enumeration, loaders, committed tables."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stddial_book import DAPO, DR_GRPO, GRPO, silent_probability, update_weight
from stddial_book.corpora.histograms import (
    KHistogram,
    SolveCounts,
    dapo_oversampling,
    expected_update_mass,
    silent_fraction,
)
from stddial_book.corpora.solve_tables import (
    build_deepscaler_tables,
    load_big_math,
    load_committed_histograms,
    union_of_deepscaler,
)


def test_bernoulli_curve_equals_per_row_computation() -> None:
    rng = np.random.default_rng(0)
    k = rng.integers(0, 65, size=5000)
    table = SolveCounts("t", k, 64)
    sizes = np.arange(1, 65)
    curve = silent_fraction(table.histogram(), sizes)
    direct = np.array([silent_probability(k / 64, g).mean() for g in sizes])
    np.testing.assert_allclose(curve, direct, rtol=1e-12)
    assert curve[0] == 1.0 and np.all(np.diff(curve) <= 1e-15)


def test_hypergeometric_by_enumeration() -> None:
    n = 6
    for k in range(n + 1):
        outcomes = [1] * k + [0] * (n - k)
        for g in range(1, n + 1):
            draws = list(itertools.combinations(range(n), g))
            silent = sum(len({outcomes[i] for i in d}) == 1 for d in draws) / len(draws)
            hist = KHistogram(n, np.bincount([k], minlength=n + 1))
            assert silent_fraction(hist, g, "hypergeometric")[0] == pytest.approx(silent, abs=1e-12)
    with pytest.raises(ValueError, match="G <= 6"):
        silent_fraction(KHistogram(6, np.ones(7)), 7, "hypergeometric")


def test_expected_update_mass_matches_direct_expectation() -> None:
    hist = KHistogram(4, np.array([1, 2, 3, 2, 1]))
    G = 3
    for recipe in (GRPO, DR_GRPO, DAPO):
        mass = expected_update_mass(hist, G, recipe)
        for k in range(5):
            p = k / 4
            direct = sum(
                math.comb(G, j) * p**j * (1 - p) ** (G - j) * update_weight(j / G, recipe, G) for j in range(G + 1)
            )
            if recipe.dynamic_sampling:
                direct /= 1 - silent_fraction(hist, G)[0]
            assert mass[k] == pytest.approx(direct, abs=1e-14)


def test_dapo_oversampling() -> None:
    hist = KHistogram(2, np.array([1, 2, 1]))  # p = 0, 1/2, 1
    assert dapo_oversampling(hist, 2)[0] == pytest.approx(1 / (1 - (0.25 + 0.5 * 0.5 + 0.25)))
    assert np.isinf(dapo_oversampling(KHistogram(2, np.array([3, 0, 1])), 4)[0])


def test_silent_fraction_for_every_g_is_the_count_weighted_closed_form() -> None:
    counts = np.random.default_rng(1).integers(0, 5000, size=65)
    hist = KHistogram(64, counts)
    curve = silent_fraction(hist, np.arange(1, 65))
    assert curve.shape == (64,)
    p = np.arange(65) / 64
    direct = [counts @ (p**G + (1 - p) ** G) / counts.sum() for G in range(1, 65)]  # p^G + (1 − p)^G per k
    np.testing.assert_allclose(curve, direct, rtol=1e-12)


def write_big_math(path: Path, rates, sources=None) -> Path:
    columns = {"problem": [f"q{i}" for i in range(len(rates))], "llama8b_solve_rate": rates}
    if sources is not None:
        columns["source"] = sources
        columns["domain"] = [["Algebra"] if i % 2 else ["Geometry", "Algebra"] for i in range(len(rates))]
    pq.write_table(pa.table(columns), path)
    return path


def test_big_math_loader_on_a_local_file(tmp_path: Path) -> None:
    rates = [0.0, 1.0, 0.5, None, 1 / 64, 63 / 64, None, 0.25]
    path = write_big_math(tmp_path / "bm.parquet", rates, sources=list("aabbccdd"))
    table = load_big_math(path)
    assert table.num_missing == 2 and table.num_rollouts == 64
    assert table.num_correct.tolist() == [0, 64, 32, 1, 63, 16]
    by_source = table.histograms_by("source")
    assert sum(h.num_prompts for h in by_source.values()) == 6
    by_domain = table.histograms_by("domain")  # a list-valued label: each problem under each of its domains
    assert set(by_domain) == {"Algebra", "Geometry"}
    assert by_domain["Algebra"].num_prompts == 6 and by_domain["Geometry"].num_prompts == 3


def test_big_math_wrong_schema_and_offline(tmp_path: Path, monkeypatch) -> None:
    pq.write_table(pa.table({"problem": ["x"], "solve_rate": [0.5]}), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="no 'llama8b_solve_rate' column"):
        load_big_math(tmp_path / "bad.parquet")
    write_big_math(tmp_path / "range.parquet", [1.5])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        load_big_math(tmp_path / "range.parquet")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="local parquet file"):
        load_big_math()


def write_deepscaler(path: Path, texts, ks) -> Path:
    pq.write_table(
        pa.table(
            {
                "prompt": [[{"content": t, "role": "user"}] for t in texts],
                "extra_info": [
                    {"difficulty": 100 * (1 - k / 128), "index": i, "split": "train"} for i, k in enumerate(ks)
                ],
            }
        ),
        path,
    )
    return path


def test_deepscaler_loader_and_union(tmp_path: Path) -> None:
    a = write_deepscaler(tmp_path / "deepscaler_a_train.parquet", ["x", "y", "z"], [0, 128, 64])
    b = write_deepscaler(tmp_path / "deepscaler_b_train.parquet", ["y", "z", "w"], [128, 5, 7])
    assert union_of_deepscaler([a])[0].num_correct.tolist() == [0, 128, 64]
    union, conflicting = union_of_deepscaler([a, b])
    assert sorted(union.num_correct.tolist()) == [0, 7, 64, 128] and conflicting == 1
    pq.write_table(pa.table({"text": ["x"]}), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="lacks the 'prompt' and 'extra_info' columns"):
        union_of_deepscaler([tmp_path / "bad.parquet"])
    pq.write_table(
        pa.table(
            {
                "prompt": [[{"content": "x", "role": "user"}]],
                "extra_info": [{"difficulty": 33.3, "index": 0, "split": "t"}],
            }
        ),
        tmp_path / "frac.parquet",
    )
    with pytest.raises(ValueError, match="integer k"):
        union_of_deepscaler([tmp_path / "frac.parquet"])


def test_committed_tables_load() -> None:
    tables = load_committed_histograms()
    assert set(tables) >= {"union", "deepscaler_uniform_train"}
    assert tables["union"].num_prompts == 29724  # unique problem texts, as the data's SOURCE.md counts
    assert tables["deepscaler_hard_extreme_train"].counts[4:].sum() == 0


@pytest.mark.needs_shared
def test_committed_tables_regenerate_from_shared(tmp_path: Path, shared_data) -> None:
    """The DeepScaleR parquet files (7 MB) are not vendored: they come from the shared data folder
    (tests/conftest.py), and the test skips without it except under CI_STRICT, where it fails."""
    build_deepscaler_tables(shared_data("deepscaler-difficulty"), tmp_path)
    committed = Path(__file__).resolve().parents[1] / "data" / "solve_rates"
    for name in ("deepscaler_k_histograms.csv", "deepscaler_k_histograms.provenance.json"):
        assert (tmp_path / name).read_text() == (committed / name).read_text(), name


def test_model_solve_counts_match_a_direct_count() -> None:
    import torch

    from stddial_book.rl.evaluate import model_solve_counts
    from stddial_book.rl.model import CharCodec, tiny_model
    from stddial_book.rl.rollout import sample
    from stddial_book.rl.tasks import make_problem, reward

    model = tiny_model(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, seed=3).eval()
    codec = CharCodec()
    ids = torch.tensor([codec.encode("3+4=7<eos>")])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(12):  # a little supervised training makes "7<eos>" likely but not certain
        optimizer.zero_grad()
        logits = model(ids).logits[0, 3:-1]
        torch.nn.functional.cross_entropy(logits, ids[0, 4:]).backward()
        optimizer.step()
    model.eval()
    problems = [make_problem(3, 4, 1), make_problem(2, 5, 1), make_problem(12, 34, 2)]
    table = model_solve_counts(model, problems, num_rollouts=16, max_new_tokens=3, seed=0)
    assert table.num_rollouts == 16 and table.num_correct.shape == (3,)
    assert table.labels["digits"].tolist() == [1, 1, 2]
    assert 0 < table.num_correct[0] < 16  # a mixed count, so the comparison below has content
    # the same sampling, done by hand for the two one-digit prompts (they share a batch)
    ids = torch.tensor([codec.encode(p.prompt) for p in problems[:2]])
    out = sample(model, ids, 3, codec.eos_id, codec.pad_id, generator=torch.Generator().manual_seed(0), num_samples=16)
    texts = [codec.decode(r[m].tolist()) for r, m in zip(out.completion_ids, out.mask)]
    direct = [sum(reward(t, p) for t in texts[16 * i : 16 * (i + 1)]) for i, p in enumerate(problems[:2])]
    assert table.num_correct[:2].tolist() == direct
    with pytest.raises(ValueError, match="empty"):
        model_solve_counts(model, [], 4, 3)
