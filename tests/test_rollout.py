"""The KV-cache sampler: shapes, masks, truncation, and log-probs that match a forward pass."""

from __future__ import annotations

import pytest
import torch

from stddial_book.rl.model import CharCodec, tiny_model
from stddial_book.rl.rollout import completion_logprobs, sample, shared_prompt_logprobs

CODEC = CharCodec()


def small_model(dtype=torch.float64):
    return tiny_model(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, seed=1, dtype=dtype).eval()


def prompts(texts):
    return torch.tensor([CODEC.encode(t) for t in texts])


def test_logprobs_match_a_forward_pass() -> None:
    model = small_model()
    ids = prompts(["12+34=", "99+01=", "50+50="] * 4)
    gen = torch.Generator().manual_seed(0)
    out = sample(model, ids, max_new_tokens=6, eos_id=CODEC.eos_id, pad_id=CODEC.pad_id, generator=gen)
    assert out.completion_ids.shape == out.logprobs.shape == out.mask.shape
    recomputed = completion_logprobs(model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.mask)
    torch.testing.assert_close(recomputed, out.logprobs.to(recomputed.dtype), atol=1e-6, rtol=1e-6)
    # masks: tokens up to and including the first EOS; truncated rows have no EOS
    for row, m, trunc in zip(out.completion_ids, out.mask, out.truncated):
        n = int(m.sum())
        has_eos = bool((row[:n] == CODEC.eos_id).any())
        assert has_eos != bool(trunc)
        if has_eos:
            assert row[n - 1] == CODEC.eos_id and n <= 6
        assert torch.all(row[n:] == CODEC.pad_id)


def test_logprobs_by_a_plain_forward_pass_in_the_test() -> None:
    """completion_logprobs against log-softmax of one unpadded forward pass over prompt + completion,
    written out here: the token at position t is predicted by the logits at position t − 1."""
    model = small_model()
    prompt, completion = CODEC.encode("12+34="), CODEC.encode("64<eos>")
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0]
    log_softmax = torch.log_softmax(logits, dim=-1)
    expected = torch.stack([log_softmax[len(prompt) - 1 + t, token] for t, token in enumerate(completion)])
    got = completion_logprobs(
        model,
        torch.tensor([prompt]),
        torch.ones(1, len(prompt), dtype=torch.bool),
        torch.tensor([completion]),
        torch.ones(1, len(completion), dtype=torch.bool),
    )
    torch.testing.assert_close(got[0], expected, atol=1e-12, rtol=1e-12)
    # temperature T divides the logits before the softmax
    hot = completion_logprobs(
        model,
        torch.tensor([prompt]),
        torch.ones(1, len(prompt), dtype=torch.bool),
        torch.tensor([completion]),
        torch.ones(1, len(completion), dtype=torch.bool),
        temperature=2.0,
    )
    log_softmax = torch.log_softmax(logits / 2.0, dim=-1)
    expected = torch.stack([log_softmax[len(prompt) - 1 + t, token] for t, token in enumerate(completion)])
    torch.testing.assert_close(hot[0], expected, atol=1e-12, rtol=1e-12)


def test_left_padded_prompts_match_unpadded() -> None:
    model = small_model()
    short, long = CODEC.encode("1+2="), CODEC.encode("12+34=")
    padded = torch.tensor([[CODEC.pad_id] * 2 + short, long])
    pmask = torch.tensor([[False, False] + [True] * 4, [True] * 6])
    completion = torch.tensor([CODEC.encode("3" + "<eos>"), CODEC.encode("64")])
    cmask = torch.ones_like(completion, dtype=torch.bool)
    lp_pad = completion_logprobs(model, padded, pmask, completion, cmask)
    lp_alone = completion_logprobs(
        model, torch.tensor([short]), torch.ones(1, 4, dtype=torch.bool), completion[:1], cmask[:1]
    )
    torch.testing.assert_close(lp_pad[:1], lp_alone, atol=1e-9, rtol=1e-9)
    out = sample(
        model, padded, 4, CODEC.eos_id, CODEC.pad_id, prompt_mask=pmask, generator=torch.Generator().manual_seed(2)
    )
    again = completion_logprobs(model, padded, pmask, out.completion_ids, out.mask)
    torch.testing.assert_close(again, out.logprobs, atol=1e-9, rtol=1e-9)


def test_seeded_sampling_is_reproducible_and_truncates() -> None:
    model = small_model(torch.float32)
    ids = prompts(["12+34="] * 8)
    a = sample(model, ids, 3, CODEC.eos_id, CODEC.pad_id, generator=torch.Generator().manual_seed(5))
    b = sample(model, ids, 3, CODEC.eos_id, CODEC.pad_id, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.completion_ids, b.completion_ids)
    # a random model rarely says EOS within 3 tokens: rows without it are flagged truncated
    assert torch.equal(a.truncated, ~(a.completion_ids == CODEC.eos_id).any(dim=1))


def test_entropy_from_the_same_pass() -> None:
    model = small_model()
    ids = prompts(["12+34="])
    comp = torch.tensor([CODEC.encode("64<eos>")])
    cmask = torch.ones_like(comp, dtype=torch.bool)
    lp, ent = completion_logprobs(model, ids, torch.ones_like(ids, dtype=torch.bool), comp, cmask, with_entropy=True)
    vocab = model.config.vocab_size
    assert torch.all(ent > 0) and torch.all(ent <= torch.log(torch.tensor(float(vocab))) + 1e-9)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"temperature": 0.0}, "temperature"),
    ],
)
def test_bad_input(kwargs, message) -> None:
    args = {"max_new_tokens": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        sample(small_model(torch.float32), prompts(["1+2="]), eos_id=1, pad_id=0, **args)


def eos_prone_model():
    """A small float64 model whose EOS logit is raised, so rows finish early and leave the batch."""
    model = small_model()
    with torch.no_grad():
        model.model.embed_tokens.weight[CODEC.eos_id] *= 4.0
    return model


def test_groups_share_the_prompt_and_finished_rows_leave() -> None:
    model = eos_prone_model()
    ids = prompts(["12+34=", "99+01=", "50+50="])
    out = sample(model, ids, 8, CODEC.eos_id, CODEC.pad_id, num_samples=4, generator=torch.Generator().manual_seed(3))
    assert out.completion_ids.shape[0] == 12
    assert torch.equal(out.prompt_ids, ids.repeat_interleave(4, dim=0))  # groups contiguous
    lengths = out.lengths
    assert lengths.min() < lengths.max()  # rows finished at different steps
    recomputed = completion_logprobs(model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.mask)
    torch.testing.assert_close(recomputed, out.logprobs, atol=1e-9, rtol=1e-9)
    for row, n, trunc in zip(out.completion_ids, lengths, out.truncated):
        assert bool(trunc) == (row[int(n) - 1] != CODEC.eos_id)
        assert torch.all(row[int(n) :] == CODEC.pad_id)


def test_left_padded_groups_with_early_finish() -> None:
    model = eos_prone_model()
    short, long = CODEC.encode("1+2="), CODEC.encode("12+34=")
    padded = torch.tensor([[CODEC.pad_id] * 2 + short, long])
    pmask = torch.tensor([[False, False] + [True] * 4, [True] * 6])
    out = sample(
        model,
        padded,
        6,
        CODEC.eos_id,
        CODEC.pad_id,
        prompt_mask=pmask,
        num_samples=5,
        generator=torch.Generator().manual_seed(4),
    )
    recomputed = completion_logprobs(model, out.prompt_ids, out.prompt_mask, out.completion_ids, out.mask)
    torch.testing.assert_close(recomputed, out.logprobs, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize(
    "texts", [["12+34=", "99+01=", "50+50="], ["1+2=", "12+345=", "7+8="]], ids=["unpadded", "left-padded"]
)
def test_shared_prompts_give_the_same_logprobs_and_gradients(texts) -> None:
    """Encoding each prompt once and sharing its cache: the log-probs, entropies and gradients of
    one pass over the prompts repeated row by row (float64, to 1e-10)."""
    model = small_model()
    encoded = [CODEC.encode(t) for t in texts]
    width = max(map(len, encoded))
    ids = torch.tensor([[CODEC.pad_id] * (width - len(e)) + e for e in encoded])
    pmask = torch.tensor([[False] * (width - len(e)) + [True] * len(e) for e in encoded])
    out = sample(
        model,
        ids,
        6,
        CODEC.eos_id,
        CODEC.pad_id,
        prompt_mask=pmask,
        generator=torch.Generator().manual_seed(3),
        num_samples=4,
    )
    # rows out of order, one prompt used only once, as a length-sorted pass has them
    rows = torch.tensor([5, 0, 9, 1, 2, 11, 3])
    groups, prompt_rows = torch.unique(rows // 4, return_inverse=True)
    args = (out.completion_ids[rows], out.mask[rows])
    full, full_ent = completion_logprobs(model, out.prompt_ids[rows], out.prompt_mask[rows], *args, with_entropy=True)
    shared, shared_ent = shared_prompt_logprobs(
        model, ids[groups], pmask[groups], prompt_rows, *args, with_entropy=True
    )
    torch.testing.assert_close(shared, full, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(shared_ent, full_ent, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(shared, out.logprobs[rows], atol=1e-10, rtol=1e-10)
    weights = torch.linspace(-1.0, 2.0, full.numel(), dtype=full.dtype).reshape(full.shape)
    g_full = torch.autograd.grad((weights * full).sum(), list(model.parameters()))
    g_shared = torch.autograd.grad((weights * shared).sum(), list(model.parameters()))
    for a, b in zip(g_full, g_shared):
        torch.testing.assert_close(b, a, atol=1e-10, rtol=1e-10)


def test_shared_prompts_one_column_and_bad_rows() -> None:
    """A one-token completion needs only the prompt pass; rows that index no prompt are refused."""
    model = small_model()
    ids = prompts(["12+34=", "50+50="])
    completion = torch.tensor([[CODEC.eos_id], [3], [4]])
    mask = torch.ones_like(completion, dtype=torch.bool)
    rows = torch.tensor([1, 0, 1])
    shared = shared_prompt_logprobs(model, ids, None, rows, completion, mask)
    full = completion_logprobs(model, ids[rows], torch.ones(3, 6, dtype=torch.bool), completion, mask)
    torch.testing.assert_close(shared, full, atol=1e-10, rtol=1e-10)
    with pytest.raises(ValueError, match="must index the 2 prompts"):
        shared_prompt_logprobs(model, ids, None, torch.tensor([0, 2, 1]), completion, mask)
    with pytest.raises(ValueError, match="prompt_rows has 2 entries"):
        shared_prompt_logprobs(model, ids, None, torch.tensor([0, 1]), completion, mask)
