"""The engine on a Hugging Face causal LM (issue 37, item 1): a tiny random-init Qwen2 model with a byte-level
BPE tokenizer and a chat template, built locally (bridges.lm_data.build_tiny_model; never the hub), wrapped in
LoRA adapters by rl.hf_policy, prompting the SmolLM2 arithmetic pool's questions.

Generation shapes and left padding, log-probabilities against a direct forward pass, the adapters as the only
trainable weights, every recipe's step, ragged group sizes, DAPO's refill, an allocation rule, checkpoint and
exact resume, π_ref with the adapters off, and bad input refused in one line. A random model never writes the
right sum, so the tests verify with a callable of their own (odd text length: mixed groups)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("peft")  # the lm extra; .ci/lowest's first stage has none

from test_trainer_allocation import OPTIONS as RULE_OPTIONS

from stddial_book.bridges.lm_data import build_tiny_model
from stddial_book.bridges.lm_pool import ANSWER_PROMPT
from stddial_book.rl.checkpoints import TrainState, checkpoint_dir
from stddial_book.rl.configs import TrainConfig
from stddial_book.rl.evaluate import evaluate, policy_solve_counts
from stddial_book.rl.hf_policy import HFPolicy, hf_policy
from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.rollout import completion_logprobs, sample, shared_prompt_logprobs
from stddial_book.rl.runlog import load_run
from stddial_book.rl.tasks import make_problem
from stddial_book.rl.text_tasks import TextProblem, read_text_problems, verify_last_number
from stddial_book.rl.trainer import _train_step, train
from stddial_book.rl.update import build_optimizer
from stddial_book.theory.recipes import GRPO

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "data" / "smollm2" / "pool_train.jsonl"
HELD_OUT = ROOT / "data" / "smollm2" / "pool_heldout.jsonl"


def odd_length(completions, problems) -> np.ndarray:
    """A test verifier: correct when the reply's text has an odd length (a random model gets mixed groups)."""
    return np.array([1.0 if len(text) % 2 else 0.0 for text in completions])


def odd_on_sums(completions, problems) -> np.ndarray:
    """Odd length on one-digit sums only; every other tier always wrong (silent groups for DAPO to refill)."""
    return np.array([1.0 if p.tier == "1d+1d" and len(t) % 2 else 0.0 for t, p in zip(completions, problems)])


def warm_start(folder: Path, steps: int = 40) -> None:
    """A few steps of teacher forcing on the pool's answers followed by EOS (about 3 s on one core), so that
    the tiny model ends its replies within a few tokens instead of running to the cap (DAPO's overlong
    filter would mask every sample out of its loss); saved back into ``folder``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    chat = [{"role": "system", "content": ANSWER_PROMPT}]
    rows = [
        (
            tokenizer.apply_chat_template([*chat, {"role": "user", "content": p.question}], add_generation_prompt=True, tokenize=False),
            p.answer,
        )
        for p in read_text_problems(POOL)
    ]  # fmt: skip
    encoded = [
        (tokenizer(q, add_special_tokens=False)["input_ids"], tokenizer(a, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
        for q, a in rows
    ]  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        chosen = [encoded[i] for i in torch.randint(len(encoded), (16,), generator=generator).tolist()]
        width = max(len(q) + len(a) for q, a in chosen)
        ids = torch.full((16, width), tokenizer.pad_token_id)
        labels = torch.full((16, width), -100)
        attention = torch.zeros(16, width, dtype=torch.long)
        for row, (q, a) in enumerate(chosen):
            ids[row, : len(q) + len(a)] = torch.tensor(q + a)
            attention[row, : len(q) + len(a)] = 1
            labels[row, len(q) : len(q) + len(a)] = torch.tensor(a)
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(folder)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    path = build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"), POOL)
    warm_start(path)
    return path


@pytest.fixture(scope="module")
def pool() -> list[TextProblem]:
    return read_text_problems(POOL)[::8]  # 28 problems, 4 of each of the 7 tiers (prompts of several lengths)


@pytest.fixture(scope="module")
def held_out() -> list[TextProblem]:
    return read_text_problems(HELD_OUT)[::16]


def policy_of(folder, verifier=odd_length, **changes) -> HFPolicy:
    settings = {"lora_r": 4, "lora_alpha": 8, "system_prompt": ANSWER_PROMPT, "verifier": verifier, **changes}
    return hf_policy(folder, **settings)


def config(recipe="grpo", **changes) -> TrainConfig:
    base = dict(
        recipe=recipe, group_size=4, prompts_per_step=4, num_minibatches=2, max_new_tokens=6, sample_budget=32,
        eval_every=2, eval_samples=2, checkpoint_every=1, lr=1e-2,
    )  # fmt: skip
    return TrainConfig(**{**base, **changes})


def test_only_the_adapters_train_in_float32(folder) -> None:
    policy = policy_of(folder)
    names = [n for n, p in policy.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    assert all(p.dtype == torch.float32 for p in policy.model.parameters())
    assert policy.trainable_parameters() == [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = build_optimizer(policy.model, config())
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(names)
    described = policy.describe()
    assert described["lora"] == {"lora_r": 4, "lora_alpha": 8, "target_modules": "all-linear", "seed": 0}
    assert described["trainable_parameters"] == sum(p.numel() for p in policy.trainable_parameters())
    # the same seed gives the same adapters, and building a policy leaves the global random state alone
    state = torch.get_rng_state()
    again = policy_of(folder)
    assert torch.equal(state, torch.get_rng_state())
    for p, q in zip(policy.trainable_parameters(), again.trainable_parameters()):
        assert torch.equal(p, q)


def test_prompts_are_the_chat_template_left_padded(folder, pool) -> None:
    policy = policy_of(folder)
    chosen = [pool[0], pool[9]]  # a sum and a word problem: prompts of two lengths
    ids, mask = policy.encode(chosen)
    lengths = mask.sum(dim=1).tolist()
    assert lengths[0] != lengths[1] and max(lengths) == ids.shape[1]
    for row, problem in enumerate(chosen):
        text = policy.tokenizer.apply_chat_template(
            [{"role": "system", "content": ANSWER_PROMPT}, {"role": "user", "content": problem.question}],
            tokenize=False,
            add_generation_prompt=True,
        )
        assert ids[row][mask[row]].tolist() == policy.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert bool((ids[row][~mask[row]] == policy.pad_id).all()) and bool(mask[row, -1])


def test_generation_shapes_with_ragged_counts(folder, pool) -> None:
    policy = policy_of(folder)
    ids, mask = policy.encode(pool[:3] + [pool[12]])
    counts = [2, 3, 1, 4]
    out = sample(
        policy.model, ids, 7, policy.eos_id, policy.pad_id, prompt_mask=mask, num_samples=counts,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    rows = sum(counts)
    assert out.completion_ids.shape[0] == out.logprobs.shape[0] == out.mask.shape[0] == rows
    assert out.completion_ids.shape[1] <= 7 and out.prompt_ids.shape == (rows, ids.shape[1])
    assert torch.equal(out.prompt_ids, ids.repeat_interleave(torch.tensor(counts), dim=0))
    lengths = out.mask.sum(dim=1)
    for row in range(rows):  # a completion ends at its EOS or at the cap (truncated), padding after
        n = int(lengths[row])
        assert bool(out.mask[row, :n].all()) and not bool(out.mask[row, n:].any())
        ended = int(out.completion_ids[row, n - 1]) == policy.eos_id
        assert ended != bool(out.truncated[row]) and (ended or n == 7)
    assert len(policy.decode(out.completion_ids)) == rows


def direct_logprobs(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """log π of each completion token from one plain forward pass over the unpadded sequence."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits.double(), dim=-1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def test_logprobs_match_a_direct_forward_pass(folder, pool) -> None:
    policy = policy_of(folder)
    with torch.no_grad():  # move the adapters off zero, so the LoRA path counts
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(1))
    chosen = [pool[0], pool[9], pool[20]]
    ids, mask = policy.encode(chosen)
    out = sample(
        policy.model, ids, 6, policy.eos_id, policy.pad_id, prompt_mask=mask, num_samples=3,
        generator=torch.Generator().manual_seed(2),
    )  # fmt: skip
    rows = torch.arange(9) // 3
    with torch.no_grad():
        shared = shared_prompt_logprobs(policy.model, ids, mask, rows, out.completion_ids, out.mask)
        full = completion_logprobs(policy.model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.mask)
    for row in range(9):
        n = int(out.mask[row].sum())
        prompt = out.prompt_ids[row][out.prompt_mask[row]].tolist()
        direct = direct_logprobs(policy.model, prompt, out.completion_ids[row, :n].tolist())
        for ours in (shared[row, :n], full[row, :n], out.logprobs[row, :n]):
            torch.testing.assert_close(ours.double(), direct, rtol=0, atol=2e-5)
        assert bool((shared[row, n:] == 0).all())


@pytest.mark.parametrize("recipe", ["grpo", "dr_grpo", "dapo"])
def test_each_recipe_trains_the_adapters(recipe, folder, pool, held_out, tmp_path) -> None:
    policy = policy_of(folder)
    base = {n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad}
    adapters = [p.detach().clone() for p in policy.trainable_parameters()]
    result = train(policy, pool, held_out, config(recipe), tmp_path)
    provenance, records = load_run(tmp_path)
    steps = [r for r in records if r["step"] > 0]
    assert result.steps == len(steps) >= 1 and result.samples_generated >= 32
    assert provenance["config"]["policy"]["lora"]["lora_r"] == 4 and provenance["config"]["train"]["group_size"] == 4
    assert any(r["optimizer_steps"] and r["update_norm"] > 0 for r in steps) and all(
        "eval/accuracy_sampled" in r for r in (records[0], steps[-1])
    )
    assert any(k.startswith("eval/accuracy_sampled/") for k in steps[-1])  # buckets are the tiers
    for r in steps:
        assert set(r["groups_generated/k"]) <= set(range(5))
        if recipe == "dapo":
            assert all(s > 0 for s in r.get("groups/sigma", []))
    for name, p in policy.model.named_parameters():  # the base weights never move; the adapters do
        if name in base:
            assert torch.equal(p, base[name]), name
    assert any(not torch.equal(p, q) for p, q in zip(policy.trainable_parameters(), adapters))
    assert (tmp_path / "checkpoint" / "model.safetensors").stat().st_size < 200_000  # the adapters only


def test_ragged_group_sizes_in_one_step(folder, pool) -> None:
    policy = policy_of(folder)
    sizes = np.array([[2, 3, 4, 6][i % 4] for i in range(len(pool))])
    cfg = config(GRPO.replace(kl_coef=0.0), identity_check_every=1, identity_check_groups=4)
    state = TrainState(0, "cpu")
    optimizer = build_optimizer(policy.model, cfg)
    metrics, generated = _train_step(policy.model, optimizer, pool, cfg, state, policy, None, sizes)
    drawn = metrics["groups_generated/prompt"]
    assert metrics["groups_generated/size"] == [int(sizes[p]) for p in drawn]
    assert generated == sum(sizes[p] for p in drawn) == metrics["samples/step_generated"]
    assert metrics["groups/size"] == [int(sizes[p]) for p in metrics["groups/prompt"]]  # mixed groups were kept
    assert metrics["optimizer_steps"] == 2 and metrics["update_norm"] > 0
    # the first minibatch's groups, checked before any step: the identity on the LoRA gradients (float32)
    first = np.array(metrics["identity/minibatch"]) == 0
    assert first.any() and max(np.array(metrics["identity/rel_error"])[first]) < 1e-4


def test_dapo_refills_silent_groups(folder, pool, tmp_path) -> None:
    policy = policy_of(folder, verifier=odd_on_sums)
    result = train(policy, pool, [], config("dapo", eval_every=0, prompts_per_step=2, max_rounds=8), tmp_path)
    _, records = load_run(tmp_path)
    assert max(r["dynamic_sampling/rounds"] for r in records) >= 2  # 6 of 7 tiers are always wrong
    for r in records:
        assert all(s > 0 for s in r.get("groups/sigma", []))
        kept = 4 * len(r.get("groups/sigma", []))
        assert (
            kept + r["samples/step_discarded_silent"] + r["samples/step_discarded_surplus"]
            == r["samples/step_generated"]
        )
    assert result.samples_kept < result.samples_generated


def test_an_allocation_rule_runs_on_the_policy(folder, pool, tmp_path) -> None:
    policy = policy_of(folder)
    cfg = config("grpo", allocation="knapsack", allocation_options={"max_size": 6}, pool_size=12, pool_samples=2)
    result = train(policy, pool, pool[-4:], cfg, tmp_path)
    _, records = load_run(tmp_path)
    steps = [r for r in records if r["step"] > 0]
    assert result.steps >= 2 and all(r["allocation/rule"] == "knapsack" for r in steps)
    assert all(len(r["pool/k"]) == 12 and r["pool/n"] == 2 for r in records if "pool/k" in r)
    assert any(len(set(r.get("groups/size", []))) > 0 for r in steps)


@pytest.mark.parametrize("rule", sorted(RULE_OPTIONS))
def test_every_allocation_rule_runs_on_the_policy(rule, folder, tmp_path) -> None:
    """Each rule of rl.allocation decides the step's groups (ragged sizes) on the HF policy, as on the testbed."""
    problems = read_text_problems(POOL)[::5]  # 45 problems, the first 40 the pool
    cfg = config(
        "grpo", prompts_per_step=8, sample_budget=64, eval_every=0, pool_size=40, pool_samples=2,
        allocation=rule, allocation_options=RULE_OPTIONS[rule],
    )  # fmt: skip
    result = train(policy_of(folder), problems, [], cfg, tmp_path)
    steps = [r for r in load_run(tmp_path)[1] if r["step"] > 0]
    assert result.steps == len(steps) >= 2 and all(r["allocation/rule"] == rule for r in steps)
    for r in steps:
        assert 0 < r["samples/step_generated"] <= 32
        parts = r["samples/step_kept"] + r["samples/step_discarded_silent"] + r["samples/step_discarded_surplus"]
        assert parts == r["samples/step_generated"]
        assert sum(r.get("groups/size", [])) == r["samples/step_kept"]


def clean(records):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in records]


def test_resume_continues_exactly(folder, pool, held_out, tmp_path) -> None:
    cfg = config("grpo", sample_budget=48)
    whole = policy_of(folder)
    train(whole, pool, held_out, cfg, tmp_path / "whole")
    first = policy_of(folder)
    train(first, pool, held_out, cfg, tmp_path / "split", stop_after=1)
    assert (checkpoint_dir(tmp_path / "split") / "model.safetensors").is_file()
    resumed = policy_of(folder)  # fresh adapters: the checkpoint restores them
    train(resumed, pool, held_out, cfg, tmp_path / "split", resume=True)
    assert clean(load_run(tmp_path / "split")[1]) == clean(load_run(tmp_path / "whole")[1])
    for p, q in zip(whole.trainable_parameters(), resumed.trainable_parameters()):
        assert torch.equal(p, q)
    other = policy_of(folder, lora_r=2)  # a policy with other adapters is refused, nothing restored
    with pytest.raises(ValueError, match="another policy"):
        train(other, pool, held_out, cfg, tmp_path / "split", resume=True)


def test_the_reference_is_the_model_with_its_adapters_off(folder, pool) -> None:
    from transformers import AutoModelForCausalLM

    policy = policy_of(folder)
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    base = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    ids, mask = policy.encode(pool[:2])
    completion = torch.tensor([[5, 6, 7], [8, 9, 10]])
    done = torch.ones_like(completion, dtype=torch.bool)
    with torch.no_grad():
        ref = completion_logprobs(policy.reference(None), ids, mask, completion, done)
        moved = completion_logprobs(policy.model, ids, mask, completion, done)
        torch.testing.assert_close(ref, completion_logprobs(base, ids, mask, completion, done), rtol=0, atol=1e-6)
    assert float((moved - ref).abs().max()) > 1e-4


def test_evaluation_and_pool_counts_use_the_policy(folder, pool) -> None:
    policy = policy_of(folder)
    result = evaluate(policy, pool[:8], 5, num_samples=3, generator=torch.Generator().manual_seed(0))
    assert set(result.sampled_by_bucket) == {p.tier for p in pool[:8]}
    assert result.successes.shape == (8,) and int(result.successes.max()) <= 3
    counts = policy_solve_counts(policy, pool[:5], 4, 5, seed=3)
    assert counts.shape == (5,) and np.array_equal(counts, policy_solve_counts(policy, pool[:5], 4, 5, seed=3))


def test_the_last_number_verifier() -> None:
    problems = [TextProblem("What is 7 + 7?", "14"), TextProblem("What is 2 * 3?", "6")]
    got = verify_last_number(["7 + 7 = 14", "The answer is 6."], problems)
    assert got.tolist() == [1.0, 1.0]
    assert verify_last_number(["7 + 7", "six"], problems).tolist() == [0.0, 0.0]
    assert read_text_problems(POOL)[0].answer == "14"


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda f, pool: train(policy_of(f), [make_problem(1, 2, 1)] * 8, [], config(eval_every=0), "x"), TypeError, "TextProblem"),
        (lambda f, pool: train(policy_of(f), pool, [], config(eval_every=0), "x", codec=CharCodec()), ValueError, "own tokenizer"),
        (lambda f, pool: train(tiny_model(), pool, [], config(eval_every=0), "x"), TypeError, "Problem objects"),
        (lambda f, pool: hf_policy(f / "missing"), ValueError, "not a local model folder"),
        (lambda f, pool: hf_policy(f, lora_r=0), ValueError, "lora_r"),
        (lambda f, pool: hf_policy(object(), None), TypeError, "transformers causal LM"),
        (lambda f, pool: policy_of(f, verifier=lambda c, p: np.full(len(c), 0.5)).verify(["1"], pool[:1]), ValueError, "0 or 1"),
        (lambda f, pool: TextProblem("What is 1 + 1?", "two"), ValueError, "number written as text"),
        (lambda f, pool: read_text_problems(POOL.with_suffix(".json")), ValueError, ".jsonl"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_in_one_line(call, error, message, folder, pool, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=message) as caught:
        call(folder, pool)
    assert "\n" not in str(caught.value)
