"""Batched sampling with a KV cache, and log-probs of given completions (chapters 4 and 9).

:func:`sample` draws one completion per prompt row at pure temperature sampling (no top-k, no
top-p: every token keeps its probability, as the policy-gradient estimator assumes), reusing
the key/value cache so each step feeds one token per row. It returns token ids, the per-token
log-probs under the sampling policy, the completion mask (EOS included, padding out) and a
truncation flag for rows that hit ``max_new_tokens`` without EOS.

:func:`completion_logprobs` recomputes the same log-probs (and per-token entropies) with one
forward pass over prompt + completion, and the tests check that the two agree.
:func:`shared_prompt_logprobs` does the same for completions that share prompts, encoding each
prompt once; the training loss uses it.

Prompts may be left-padded (``prompt_mask`` false on padding); positions are then counted from
each row's first real token, as ``model.generate`` does.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from stddial_book.core.checks import as_mask, check_int, check_number, check_tensor, check_token_ids

__all__ = ["Rollout", "sample", "completion_logprobs", "shared_prompt_logprobs"]


@dataclass
class Rollout:
    """A batch of sampled completions, padded to the longest one.

    B is the number of rows (one per sample), P the prompt width and T the longest completion, in
    tokens. ``prompt_ids`` (B, P) are each row's prompt token ids and ``prompt_mask`` (B, P, bool) is
    false on their left padding; ``completion_ids`` (B, T) are the sampled tokens, padded with the pad
    id after EOS; ``logprobs`` (B, T) is log π_old of each sampled token under the (tempered) policy
    that sampled it, 0 on padding; ``mask`` (B, T, bool) marks the completion tokens, EOS included;
    ``truncated`` (B,) bool marks the rows that produced no EOS within ``max_new_tokens``.
    """

    prompt_ids: torch.Tensor  # (B, P)
    prompt_mask: torch.Tensor  # (B, P) bool, false on left padding
    completion_ids: torch.Tensor  # (B, T) padded with pad_id after EOS
    logprobs: torch.Tensor  # (B, T) log π_old of each sampled token, 0 on padding
    mask: torch.Tensor  # (B, T) bool, completion tokens with EOS
    truncated: torch.Tensor  # (B,) bool, no EOS within max_new_tokens

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(dim=1)


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    """Half-precision logits to float32 for the softmax; float32/float64 stay as they are."""
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def _last_logit_only(model) -> dict[str, int]:
    """The keyword that makes a causal LM compute logits at the last position only.

    ``logits_to_keep`` since transformers 4.50, ``num_logits_to_keep`` in 4.45-4.49; older
    models take neither, and then all logits are computed (same result, more work).
    """
    params = inspect.signature(model.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


def _vocab_size(model) -> int:
    """The number of token ids ``model`` embeds (ids must lie below it)."""
    embeddings = getattr(model, "get_input_embeddings", None)
    if not callable(model) or not callable(embeddings):
        raise TypeError(
            f"model must be a causal LM such as stddial_book.rl.model.tiny_model(); got {type(model).__name__}."
        )
    rows = getattr(embeddings(), "num_embeddings", None)
    return int(rows if rows is not None else model.config.vocab_size)


def _check_prompts(model, prompt_ids, prompt_mask) -> tuple[int, torch.Tensor]:
    """Validate prompts (ids in the vocabulary, a left-padding mask); returns the vocabulary
    size and the mask as booleans (all true when ``prompt_mask`` is None)."""
    vocab = _vocab_size(model)
    check_tensor(prompt_ids, "prompt_ids", kind="int")
    if prompt_ids.dim() != 2 or prompt_ids.shape[0] == 0 or prompt_ids.shape[1] == 0:
        raise ValueError(f"prompt_ids must have shape (batch, length) with both > 0; got {tuple(prompt_ids.shape)}.")
    check_token_ids(prompt_ids, "prompt_ids", vocab)
    if prompt_mask is None:
        return vocab, torch.ones_like(prompt_ids, dtype=torch.bool)
    prompt_mask = as_mask(prompt_mask, "prompt_mask", tuple(prompt_ids.shape))
    # left padding only: a real token is never followed by padding, and the last token is real
    if bool((prompt_mask[:, :-1] & ~prompt_mask[:, 1:]).any()) or not bool(prompt_mask[:, -1].all()):
        raise ValueError(
            "prompt_mask must mark left padding: false on padding before each prompt, true on its "
            "tokens to the end of the row (every row needs at least one token)."
        )
    return vocab, prompt_mask


def _check_temperature(temperature: float) -> float:
    temperature = check_number(temperature, "temperature")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (pass greedy=True for greedy decoding); got {temperature}.")
    return temperature


def _check_scoring_temperature(temperature) -> None:
    """The temperature of :func:`completion_logprobs` and :func:`shared_prompt_logprobs`: a
    finite int or float > 0 (``ValueError`` otherwise)."""
    if isinstance(temperature, bool) or not (isinstance(temperature, (int, float)) and 0 < temperature < float("inf")):
        raise ValueError(f"temperature must be a finite number > 0; got {temperature!r}.")


def position_ids_of(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(dim=1) - 1).clamp(min=0)


def _check_sample_args(
    model, prompt_ids, prompt_mask, max_new_tokens, eos_id, pad_id, temperature, generator, num_samples, greedy
) -> tuple[torch.Tensor, int, float, int | list[int]]:
    """Validate :func:`sample`'s arguments; returns the prompt mask as booleans, ``max_new_tokens``,
    ``temperature`` and ``num_samples`` as checked numbers (chapter 4)."""
    vocab, prompt_mask = _check_prompts(model, prompt_ids, prompt_mask)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=1)
    temperature = _check_temperature(temperature)
    num_samples = _check_num_samples(num_samples, prompt_ids.shape[0])
    for name, value in (("eos_id", eos_id), ("pad_id", pad_id)):
        if not 0 <= check_int(value, name) < vocab:
            raise ValueError(
                f"{name}={value} is not a token id of the model (0..{vocab - 1}); pass "
                f"CharCodec().{name} or the tokenizer's."
            )
    if not isinstance(greedy, bool):
        raise TypeError(f"greedy must be True or False; got {type(greedy).__name__} {greedy!r}.")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None; got {type(generator).__name__}.")
    return prompt_mask, max_new_tokens, temperature, num_samples


def _check_num_samples(num_samples, num_prompts: int) -> int | list[int]:
    """One count for every prompt (an int >= 1), or one count per prompt row (a sequence)."""
    if isinstance(num_samples, (list, tuple)) or getattr(num_samples, "ndim", 0) == 1:
        counts = [check_int(n, "each entry of num_samples", minimum=1) for n in list(num_samples)]
        if len(counts) != num_prompts:
            raise ValueError(
                f"num_samples holds {len(counts)} counts for {num_prompts} prompts; give one count per prompt row."
            )
        return counts
    return check_int(num_samples, "num_samples", minimum=1)


def _repeat_rows(cache, logits, position, attention, prompt_ids, prompt_mask, num_samples: int | list[int]):
    """Each prompt's KV cache, last logits, position, attention and ids repeated once per sample:
    ``num_samples`` times each, or its own count each (a list). The prompt is encoded once."""
    if isinstance(num_samples, int):
        cache.batch_repeat_interleave(num_samples)
        return (
            logits.repeat_interleave(num_samples, dim=0),
            position.repeat_interleave(num_samples),
            attention.repeat_interleave(num_samples, dim=0) if attention is not None else None,
            prompt_ids.repeat_interleave(num_samples, dim=0),
            prompt_mask.repeat_interleave(num_samples, dim=0),
        )
    index = torch.repeat_interleave(
        torch.arange(len(num_samples), device=logits.device), torch.tensor(num_samples, device=logits.device)
    )
    cache.batch_select_indices(index)
    return (
        logits[index],
        position[index],
        attention[index] if attention is not None else None,
        prompt_ids[index],
        prompt_mask[index],
    )


def _encode_prompts(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, padded: bool):
    """One forward pass over the prompts that fills a fresh KV cache, with the logits of each
    prompt's last position only (they predict the first completion token; chapter 4)."""
    # An explicit cache object: transformers < 4.48 would otherwise return a tuple of tensors,
    # which cannot be repeated or pruned per row below.
    return model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask.long() if padded else None,
        position_ids=position_ids_of(prompt_mask) if padded else None,
        use_cache=True,
        past_key_values=DynamicCache(),
        **_last_logit_only(model),
    )


def _next_token(
    logits: torch.Tensor, temperature: float, greedy: bool, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's next token, drawn from softmax(logits / T) (or its most probable one when
    ``greedy``), and its log-probability log π(token) under that tempered policy (chapter 4)."""
    log_probs = torch.log_softmax(_upcast(logits) / temperature, dim=-1)
    if greedy:
        nxt = log_probs.argmax(dim=-1)
    else:
        nxt = torch.multinomial(log_probs.exp(), 1, generator=generator).squeeze(1)
    return nxt, log_probs.gather(1, nxt[:, None]).squeeze(1)


def _generate_tokens(
    model, cache, logits, position, attention, max_new_tokens, eos_id, pad_id, temperature, generator, greedy
):
    """The completion tokens, one step at a time on the KV cache: rows that produce EOS leave the
    batch (and the cache). ``attention`` is the running attention mask, ``None`` without left
    padding. Returns tokens, their log-probs and the completion mask, each (B, steps), and the
    rows still generating at the cap (truncated; chapter 4)."""
    device, batch = logits.device, logits.shape[0]
    padded = attention is not None
    tokens = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logps = torch.zeros(batch, max_new_tokens, dtype=_upcast(logits).dtype, device=device)
    mask = torch.zeros(batch, max_new_tokens, dtype=torch.bool, device=device)
    rows = torch.arange(batch, device=device)  # the rows still generating, in the full batch
    steps = 0
    for step in range(max_new_tokens):
        nxt, chosen = _next_token(logits, temperature, greedy, generator)
        tokens[rows, step] = nxt
        logps[rows, step] = chosen
        mask[rows, step] = True
        steps = step + 1
        going = nxt != eos_id
        if not bool(going.all()):
            if not bool(going.any()):
                rows = rows[going]
                break
            keep = going.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            rows, nxt, position = rows[keep], nxt[keep], position[keep]
            attention = attention[keep] if padded else None
        if step + 1 == max_new_tokens:
            break
        position = position + 1
        if padded:
            attention = torch.cat([attention, torch.ones(len(rows), 1, dtype=attention.dtype, device=device)], dim=1)
        out = model(
            input_ids=nxt[:, None],
            attention_mask=attention,
            position_ids=position[:, None] if padded else None,
            past_key_values=cache,
            use_cache=True,
        )
        cache, logits = out.past_key_values, out.logits[:, -1, :]
    return tokens[:, :steps], logps[:, :steps], mask[:, :steps], rows


@torch.no_grad()  # not inference_mode: its tensors could not index a later autograd pass
def sample(
    model,
    prompt_ids: torch.Tensor,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    prompt_mask: torch.Tensor | None = None,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    num_samples: int | list[int] = 1,
    greedy: bool = False,
) -> Rollout:
    """Sample ``num_samples`` completions per prompt row with the KV cache.

    The rows of the result are prompt-major: the ``num_samples`` completions of prompt 0 first,
    so a group of G = ``num_samples`` is contiguous, as :func:`group_advantages` expects.
    ``num_samples`` may also be one count per prompt row (ragged groups, each still contiguous and
    sharing its prompt's cache). With
    ``greedy`` every row takes its most probable token instead (the greedy accuracy of chapters
    7-11); the recorded log-probs are still those of the temperature-scaled policy. Two
    things make this cheaper than ``model.generate`` on the same batch: each distinct prompt is
    encoded once and its cache shared by its samples (``generate`` encodes every copy), and rows
    that have produced EOS leave the batch instead of being carried to the length cap.

    ``model`` is a causal LM (e.g. :func:`~stddial_book.rl.model.tiny_model`); ``prompt_ids`` (B, P)
    are the prompts' token ids, left-padded where ``prompt_mask`` (B, P, bool) is false (``None``: no
    padding); ``max_new_tokens`` caps each completion's length in tokens; ``eos_id`` is the token that
    ends a completion and ``pad_id`` the one that fills a row after it; ``temperature`` (> 0; 1, the
    default, samples the policy itself) divides the logits; ``generator`` is the
    ``torch.Generator`` the draws use (``None``: torch's global one).
    """
    prompt_mask, max_new_tokens, temperature, num_samples = _check_sample_args(
        model, prompt_ids, prompt_mask, max_new_tokens, eos_id, pad_id, temperature, generator, num_samples, greedy
    )
    device = prompt_ids.device
    padded = not bool(prompt_mask.all())
    # Without padding the model derives positions and the causal mask itself, which is cheaper
    # than building a mask each step; with left padding both are passed explicitly.
    attention = prompt_mask.long() if padded else None
    out = _encode_prompts(model, prompt_ids, prompt_mask, padded)
    cache, logits = out.past_key_values, out.logits[:, -1, :]
    position = position_ids_of(prompt_mask)[:, -1]
    if num_samples != 1:
        logits, position, attention, prompt_ids, prompt_mask = _repeat_rows(
            cache, logits, position, attention, prompt_ids, prompt_mask, num_samples
        )
    tokens, logps, mask, rows = _generate_tokens(
        model, cache, logits, position, attention, max_new_tokens, eos_id, pad_id, temperature, generator, greedy
    )
    truncated = torch.zeros(prompt_ids.shape[0], dtype=torch.bool, device=device)
    truncated[rows] = True
    return Rollout(
        prompt_ids=prompt_ids,
        prompt_mask=prompt_mask,
        completion_ids=tokens,
        logprobs=logps,
        mask=mask,
        truncated=truncated,
    )


def completion_logprobs(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    mask: torch.Tensor,
    with_entropy: bool = False,
    temperature: float = 1.0,
):
    """Per-token log π(completion token) from one forward pass over prompt + completion.

    ``temperature`` divides the logits as :func:`sample` does, so that the log-probs of a batch
    sampled at temperature T are those of the policy that sampled it (ratio 1 before any update).

    Returns ``logprobs`` of shape (B, T) (zero where ``mask`` is false), and with
    ``with_entropy`` also the per-token entropies of the same distributions, so the loss and its
    entropy metric need no second pass. Gradients flow unless called under ``torch.no_grad()``.

    ``model`` is a causal LM; ``prompt_ids`` and ``prompt_mask`` (B, P) are the prompts as
    :func:`sample` takes them (the mask false on left padding); ``completion_ids`` (B, T) and
    ``mask`` (B, T, bool) are one completion per prompt row and its real tokens, as in a
    :class:`Rollout`.
    """
    check_tensor(prompt_ids, "prompt_ids", kind="int")
    check_tensor(completion_ids, "completion_ids", ndim=2, kind="int")
    check_tensor(mask, "mask")
    check_tensor(prompt_mask, "prompt_mask")
    if completion_ids.shape != mask.shape or prompt_ids.shape != prompt_mask.shape:
        raise ValueError("completion_ids and mask (and prompt_ids and prompt_mask) must share a shape.")
    vocab, prompt_mask = _check_prompts(model, prompt_ids, prompt_mask)
    if completion_ids.shape[0] != prompt_ids.shape[0]:
        raise ValueError(
            f"completion_ids has {completion_ids.shape[0]} rows but prompt_ids {prompt_ids.shape[0]}; "
            "pass one completion per prompt row."
        )
    check_token_ids(completion_ids, "completion_ids", vocab)
    mask = as_mask(mask, "mask")
    _check_scoring_temperature(temperature)
    # The last completion column is only ever a target: the logits that predict it come from
    # the positions before it, and causal attention keeps it from touching them. So it is not
    # fed in; the pass is one position shorter and gives the same log-probs.
    ids = torch.cat([prompt_ids, completion_ids[:, :-1]], dim=1)
    if bool(prompt_mask.all()):
        # No left padding: padding sits only after each completion, where causal attention keeps
        # it from touching any real token, so the model's own causal mask and positions are
        # exact, and much cheaper than an explicit mask.
        logits = model(input_ids=ids).logits
    else:
        full_mask = torch.cat([prompt_mask, mask[:, :-1]], dim=1)
        logits = model(input_ids=ids, attention_mask=full_mask.long(), position_ids=position_ids_of(full_mask)).logits
    prompt_len = prompt_ids.shape[1]
    return _chosen(logits[:, prompt_len - 1 :, :], completion_ids, mask, with_entropy, temperature)


def _chosen(
    logits: torch.Tensor, completion_ids: torch.Tensor, mask: torch.Tensor, with_entropy: bool, temperature: float
):
    """Log-probs of ``completion_ids`` under ``logits`` (B, T, V), the logits that predict them,
    at ``temperature``; zero where ``mask`` is false; with ``with_entropy`` also the entropies."""
    scaled = _upcast(logits)
    log_probs = torch.log_softmax(scaled if temperature == 1.0 else scaled / temperature, dim=-1)
    chosen = log_probs.gather(2, completion_ids[:, :, None]).squeeze(2)
    chosen = torch.where(mask, chosen, torch.zeros_like(chosen))
    if not with_entropy:
        return chosen
    with torch.no_grad():  # a metric: kept out of the autograd graph
        detached = log_probs.detach()
        entropy = -(detached.exp() * detached).sum(dim=-1)
    return chosen, torch.where(mask, entropy, torch.zeros_like(entropy))


def _check_shared_args(
    model, prompt_ids, prompt_mask, prompt_rows, completion_ids, mask, temperature
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate :func:`shared_prompt_logprobs`'s arguments: every completion row names one of the
    prompts given. Returns the prompt mask and the completion mask as booleans (chapter 10)."""
    check_tensor(prompt_rows, "prompt_rows", ndim=1, kind="int")
    check_tensor(completion_ids, "completion_ids", ndim=2, kind="int")
    vocab, prompt_mask = _check_prompts(model, prompt_ids, prompt_mask)
    rows = completion_ids.shape[0]
    if prompt_rows.shape[0] != rows:
        raise ValueError(
            f"prompt_rows has {prompt_rows.shape[0]} entries but completion_ids {rows} "
            "rows; give each completion row the index of its prompt."
        )
    if rows and not (int(prompt_rows.min()) >= 0 and int(prompt_rows.max()) < prompt_ids.shape[0]):
        raise ValueError(
            f"prompt_rows must index the {prompt_ids.shape[0]} prompts given (0..{prompt_ids.shape[0] - 1})."
        )
    check_token_ids(completion_ids, "completion_ids", vocab)
    mask = as_mask(mask, "mask", tuple(completion_ids.shape))
    _check_scoring_temperature(temperature)
    return prompt_mask, mask


def shared_prompt_logprobs(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    prompt_rows: torch.Tensor,
    completion_ids: torch.Tensor,
    mask: torch.Tensor,
    with_entropy: bool = False,
    temperature: float = 1.0,
):
    """:func:`completion_logprobs` for completions that share prompts, as a group's G samples do.

    ``prompt_ids`` and ``prompt_mask`` hold each distinct prompt once; ``prompt_rows[i]`` is the
    index of completion row i's prompt among them. Each prompt is encoded once and its
    key/value cache is shared by its completions, as :func:`sample` does; the gradient of every
    completion flows back through the shared cache into the prompt's pass. The result is
    :func:`completion_logprobs` on the prompts repeated row by row, to float rounding (a test
    checks it), for far fewer tokens when completions are short: a group's prompt costs one row
    instead of G.

    ``model`` is a causal LM; ``prompt_rows`` (R,) holds each completion row's prompt index;
    ``completion_ids`` and ``mask`` (R, T) are the completions and their real tokens;
    ``with_entropy`` and ``temperature`` mean what they mean for :func:`completion_logprobs`
    (default: no entropies, temperature 1).
    """
    prompt_mask, mask = _check_shared_args(
        model, prompt_ids, prompt_mask, prompt_rows, completion_ids, mask, temperature
    )
    padded = not bool(prompt_mask.all())
    out = _encode_prompts(model, prompt_ids, prompt_mask, padded)
    # the logits at each prompt's last position predict its completions' first tokens
    logits = out.logits[:, -1:, :][prompt_rows]
    if completion_ids.shape[1] > 1:
        cache = out.past_key_values
        cache.batch_select_indices(prompt_rows)  # a gather: its gradient sums over the group
        # as in completion_logprobs, the last completion column is only a target
        inputs = completion_ids[:, :-1]
        if padded:
            full_mask = torch.cat([prompt_mask[prompt_rows], mask[:, :-1]], dim=1)
            rest = model(
                input_ids=inputs,
                attention_mask=full_mask.long(),
                position_ids=position_ids_of(full_mask)[:, prompt_ids.shape[1] :],
                past_key_values=cache,
                use_cache=True,
            ).logits
        else:
            rest = model(input_ids=inputs, past_key_values=cache, use_cache=True).logits
        logits = torch.cat([logits, rest], dim=1)
    return _chosen(logits, completion_ids, mask, with_entropy, temperature)
