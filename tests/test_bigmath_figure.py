"""Big-Math: the histogram read from the paper's figure, every published number, and the loader.

The published numbers are the source paper's (Bay and Yearick, 2026, §6 and Table 3); the counts
are extracted from its figure by stddial_book.corpora.bigmath_figure and committed under data/.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stddial_book.core.resources import data_path
from stddial_book.corpora import bigmath_figure as bf
from stddial_book.corpora.solve_tables import BIG_MATH_REPO, big_math_histogram, load_big_math

# The paper's figure, vendored under data/sources/bigmath/ (see its SOURCE.md) and shipped with the
# package, so the extraction below runs in every checkout and wheel install.
FIGURE = data_path(*bf.FIGURE_FILE)


@pytest.fixture(scope="module")
def committed() -> np.ndarray:
    return bf.load_big_math_histogram().counts


def test_committed_counts_reproduce_every_published_number(committed: np.ndarray) -> None:
    rows = bf.check_against_paper(committed)
    assert [r["quantity"] for r in rows] == list(bf.PUBLISHED)
    assert all(r["agrees"] for r in rows), [r for r in rows if not r["agrees"]]
    assert committed.sum() == 215_608 and committed.shape == (65,)


def test_a_wrong_histogram_is_caught(committed: np.ndarray) -> None:
    """Moving 1,000 problems (0.5%) from k = 32 to k = 0 breaks several published numbers."""
    moved = committed.copy()
    moved[32] -= 1000
    moved[0] += 1000
    failing = {r["quantity"] for r in bf.check_against_paper(moved) if not r["agrees"]}
    assert {"never_solved_pct", "silent_bernoulli_G8_pct"} <= failing


def test_extraction_from_the_figure_equals_the_committed_table(committed: np.ndarray, tmp_path: Path) -> None:
    figure = bf.read_figure(FIGURE)
    assert np.max(np.abs(figure.bar_counts - np.round(figure.bar_counts))) < 1e-3  # whole problems
    assert set(figure.decile_shares) == {"grpo", "dr_grpo"}
    np.testing.assert_array_equal(bf.counts_from_figure(figure), committed)
    table = bf.build_big_math_table(FIGURE, tmp_path)
    assert table.read_text() == data_path("solve_rates", table.name).read_text()
    np.testing.assert_array_equal(bf.load_big_math_histogram(tmp_path).counts, committed)


def test_a_misread_figure_is_refused() -> None:
    figure = bf.read_figure(FIGURE)
    swapped = bf.FigureData(
        figure.bar_counts, {"grpo": figure.decile_shares["dr_grpo"], "dr_grpo": figure.decile_shares["grpo"]}
    )
    with pytest.raises(ValueError, match="n_63|decile shares"):
        bf.counts_from_figure(swapped)
    fractional = bf.FigureData(figure.bar_counts * 1.01, figure.decile_shares)
    with pytest.raises(ValueError, match="whole numbers"):
        bf.counts_from_figure(fractional)


def test_a_different_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "fig.pdf"
    other.write_bytes(b"%PDF-1.4\n")
    with pytest.raises(ValueError, match="sha256"):
        bf.build_big_math_table(other, tmp_path)


def big_math_parquet(path: Path, counts: np.ndarray, with_missing: int = 0) -> Path:
    """A parquet of the paper's dataset schema (open-r1 processed, config all) holding ``counts``."""
    k = np.repeat(np.arange(65), counts)
    rates = (k / 64).tolist() + [None] * with_missing
    n = len(rates)
    pq.write_table(
        pa.table(
            {
                "prompt": [f"problem {i}" for i in range(n)],
                "solution": ["42"] * n,
                "source": ["cn_k12" if i % 3 else "olympiads" for i in range(n)],
                "domain": [
                    ["Mathematics -> Algebra"] if i % 2 else ["Mathematics -> Geometry", "Mathematics -> Algebra"]
                    for i in range(n)
                ],
                "llama8b_solve_rate": pa.array(rates, type=pa.float64()),
            }
        ),
        path,
    )
    return path


def test_loader_on_a_parquet_of_the_real_schema_gives_the_committed_histogram(
    committed: np.ndarray, tmp_path: Path
) -> None:
    table = load_big_math(big_math_parquet(tmp_path / "all.parquet", committed, with_missing=3))
    assert table.num_missing == 3
    np.testing.assert_array_equal(table.histogram().counts, committed)
    assert sum(h.num_prompts for h in table.histograms_by("source").values()) == 215_608


def test_loader_reads_the_papers_dataset_through_datasets(
    committed: np.ndarray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the hub reachable, load_big_math() asks datasets for the paper's dataset and config;
    here datasets reads a local parquet of that schema instead of the hub."""
    import datasets

    import stddial_book.core.hub as hub

    path = big_math_parquet(tmp_path / "all.parquet", committed)
    calls = []
    real_load = datasets.load_dataset

    def fake_load(repo, config=None, split=None, **kwargs):
        calls.append((repo, config, split))
        return real_load("parquet", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))

    monkeypatch.setattr(hub, "hub_unavailable_reason", lambda *a, **k: None)
    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    np.testing.assert_array_equal(load_big_math().histogram().counts, committed)
    hist, where = big_math_histogram()
    np.testing.assert_array_equal(hist.counts, committed)
    assert calls == [(BIG_MATH_REPO, "all", "train")] * 2 and "hub" in where
    load_big_math("SynthLabsAI/Big-Math-RL-Verified")
    assert calls[-1] == ("SynthLabsAI/Big-Math-RL-Verified", None, "train")


def test_offline_the_committed_table_is_used_and_named(committed: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hist, where = big_math_histogram()
    np.testing.assert_array_equal(hist.counts, committed)
    assert "extracted from the source paper's figure" in where and "HF_HUB_OFFLINE" in where
    with pytest.raises(RuntimeError, match="local parquet file"):
        load_big_math()
