"""The testbed's model: a character tokenizer and a tiny Llama-style transformer (chapter 9).

* :func:`make_tokenizer` builds a character-level vocabulary for the addition task as a
  ``tokenizers`` WordLevel model wrapped in ``transformers.PreTrainedTokenizerFast``, so it
  saves, loads and batches like any hub tokenizer; :class:`CharCodec` is the plain dict
  lookup the sampling loop uses (much faster than a tokenizer call per step).
* :func:`tiny_model` builds a randomly initialised ``LlamaForCausalLM`` from a config
  (about 1.05M parameters at the defaults: hidden 128, 4 layers, 4 heads, ff 512, tied
  embeddings).
* :func:`save` / :func:`load` write and read both with safetensors.
* :func:`load_hub_model` loads a hub model by name for readers who scale up; offline (as on the
  book's build machines) it fails at once with a message instead of retrying for a minute.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stddial_book.core.checks import check_int
from stddial_book.core.hub import hub_unavailable_reason
from stddial_book.rl.tasks import EOS

__all__ = [
    "PAD",
    "VOCAB",
    "CharCodec",
    "make_tokenizer",
    "tiny_model",
    "rmsnorm_in_own_dtype",
    "model_for_profile",
    "save",
    "load",
    "load_hub_model",
]

PAD = "<pad>"
#: Token strings in id order: padding, end of sequence, then every character the task uses.
VOCAB: tuple[str, ...] = (PAD, EOS, *"0123456789+=")


class CharCodec:
    """Text ⇄ ids for the task's alphabet with a dict lookup (the hot-loop twin of the tokenizer).

    ``vocab`` is the token strings in id order (default :data:`VOCAB`): distinct, non-empty, and
    holding ``<pad>`` and ``<eos>``.
    """

    def __init__(self, vocab: Sequence[str] = VOCAB) -> None:
        self.vocab = _check_vocab(vocab)
        self.ids = {token: i for i, token in enumerate(self.vocab)}
        self.pad_id = self.ids[PAD]
        self.eos_id = self.ids[EOS]

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; ``<eos>`` and ``<pad>`` are single tokens, every other character one."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str (a prompt such as '12+34='); got {type(text).__name__} {text!r:.40}.")
        out: list[int] = []
        i = 0
        while i < len(text):
            for special in (EOS, PAD):
                if text.startswith(special, i):
                    out.append(self.ids[special])
                    i += len(special)
                    break
            else:
                if text[i] not in self.ids:
                    raise ValueError(
                        f"character {text[i]!r} is not in the task's vocabulary {self.vocab[2:]}; "
                        "prompts must be made by stddial_book.rl.tasks."
                    )
                out.append(self.ids[text[i]])
                i += 1
        return out

    def decode(self, ids: Sequence[int], stop_at_eos: bool = True) -> str:
        """Text of ``ids`` (padding dropped); stops after the first EOS when ``stop_at_eos``."""
        if ids is None or isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            raise TypeError(
                f"ids must be a sequence of token ids (a list or a 1-D tensor); got {type(ids).__name__} {ids!r:.40}."
            )
        if hasattr(ids, "dtype") and hasattr(ids, "ndim"):
            if ids.ndim != 1:
                raise ValueError(f"ids must be one sequence (1-D); got shape {tuple(ids.shape)}. Decode row by row.")
            if str(ids.dtype) in ("bool", "torch.bool"):
                raise TypeError("ids are booleans (a mask?); pass the token ids, e.g. ids[mask].")
        pieces: list[str] = []
        for i in ids:
            try:
                if isinstance(i, (bool, np.bool_)):
                    raise TypeError("a boolean is not a token id")
                j = int(i)
                if j != i or not 0 <= j < len(self.vocab):
                    raise ValueError
            except (TypeError, ValueError, OverflowError):
                raise ValueError(
                    f"token id {i!r} is not in the vocabulary (ids 0 to {len(self.vocab) - 1}); "
                    "were these ids made by another tokenizer?"
                ) from None
            token = self.vocab[j]
            if token == PAD:
                continue
            pieces.append(token)
            if stop_at_eos and token == EOS:
                break
        return "".join(pieces)


def make_tokenizer(vocab: Sequence[str] = VOCAB):
    """The character vocabulary as a ``PreTrainedTokenizerFast`` (WordLevel, one token a char).

    ``vocab`` is the token strings in id order, as for :class:`CharCodec` (default :data:`VOCAB`); a
    character outside it encodes as ``<pad>``. The tokenizer pads on the left.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = _check_vocab(vocab)
    specials = "|".join(t.replace("<", r"\<").replace(">", r"\>") for t in (EOS, PAD))
    core = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token=PAD))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(f"{specials}|."), behavior="isolated")
    core.decoder = decoders.Fuse()  # characters join without spaces
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, pad_token=PAD, padding_side="left")


def tiny_model(
    vocab_size: int = len(VOCAB),
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int = 512,
    max_positions: int = 64,
    seed: int = 0,
    dtype=None,
):
    """A randomly initialised Llama-style causal LM with tied embeddings, reproducible by seed.

    ``dtype`` is None (float32) or a floating torch dtype such as ``torch.float64``.
    ``vocab_size`` is the number of token ids (at least 2; default: :data:`VOCAB`'s 14);
    ``hidden_size`` the residual width, ``num_layers`` the transformer blocks, ``num_heads`` the
    attention heads (as many key/value heads; it must divide ``hidden_size``), ``intermediate_size``
    the MLP's inner width and ``max_positions`` the longest sequence, in tokens. ``seed`` (a
    non-negative integer) seeds torch's global generator just before the weights are drawn.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    vocab_size = check_int(vocab_size, "vocab_size", minimum=2, hint="Ids 0 and 1 are <pad> and <eos>.")
    hidden_size, num_layers, num_heads, intermediate_size, max_positions = (
        check_int(value, name, minimum=1)
        for name, value in (
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
            ("num_heads", num_heads),
            ("intermediate_size", intermediate_size),
            ("max_positions", max_positions),
        )
    )
    seed = check_int(seed, "seed", minimum=0, hint="Seeds are non-negative integers.")
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be None or a floating torch dtype such as torch.float64; got {dtype!r}.")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads}).")
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=VOCAB.index(PAD),
        eos_token_id=VOCAB.index(EOS),
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    if dtype is not None:
        model = model.to(dtype)
    if dtype == torch.float64:
        rmsnorm_in_own_dtype(model)
    return model


def model_for_profile(profile, seed: int = 0, dtype=None):
    """The testbed model at the size a :class:`stddial_book.rl.profiles.Profile` names.

    ``profile`` is that profile (its ``model`` settings go to :func:`tiny_model`); ``seed`` and
    ``dtype`` are :func:`tiny_model`'s (default seed 0, float32).
    """
    if not isinstance(getattr(profile, "model", None), dict):
        raise TypeError(
            f"profile must be a stddial_book.rl.profiles.Profile (e.g. profiles.PROFILES['full'] or "
            f"profiles.active_profile()); got {type(profile).__name__} {profile!r:.40}."
        )
    return tiny_model(seed=seed, dtype=dtype, **profile.model)


def rmsnorm_in_own_dtype(model) -> None:
    """Make every RMSNorm compute in the model's dtype.

    transformers' Llama RMSNorm computes in float32 whatever the input (a guard for float16);
    for a float64 model that is a downcast, and its rounding (about 1e-7) then shows up in
    gradients. Chapter 4 checks an identity to 1e-10, so a float64 model keeps float64 here.
    ``model`` is changed in place: each module whose class name ends in ``RMSNorm`` gets this forward.
    """
    import types

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    import torch

    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm"):
            module.forward = types.MethodType(forward, module)


def save(model, tokenizer, directory: str | os.PathLike) -> Path:
    """Write the model (safetensors) and the tokenizer to ``directory``; returns the path.

    ``model`` and ``tokenizer`` are transformers objects (anything with ``save_pretrained``);
    ``directory`` is created if it does not exist.
    """
    for name, value in (("model", model), ("tokenizer", tokenizer)):
        if not callable(getattr(value, "save_pretrained", None)):
            raise TypeError(
                f"{name} must be a transformers {name} (it has save_pretrained); got {type(value).__name__}."
            )
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def load(directory: str | os.PathLike):
    """Read back what :func:`save` wrote: ``(model, tokenizer)``.
    ``directory`` is the folder :func:`save` wrote to; nothing is downloaded."""
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    path = Path(directory)
    if not (path / "model.safetensors").exists():
        raise ValueError(f"{path} holds no model.safetensors; save a model there with stddial_book.rl.model.save.")
    return (
        AutoModelForCausalLM.from_pretrained(path, local_files_only=True),
        PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True),
    )


def load_hub_model(name: str, timeout_s: float = 3.0, **kwargs):
    """``(model, tokenizer)`` for a hub model name or a local directory.

    A local directory, or a model already in the Hugging Face cache, loads without a network.
    Otherwise, with ``HF_HUB_OFFLINE=1`` or when huggingface.co cannot be reached within
    ``timeout_s`` seconds, this raises ``RuntimeError`` at once, saying how to proceed offline.
    ``name`` is the hub id (such as ``"HuggingFaceTB/SmolLM2-135M-Instruct"``) or a local folder;
    ``kwargs`` go to the model's ``from_pretrained`` (not the tokenizer's).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if Path(name).is_dir():
        return (
            AutoModelForCausalLM.from_pretrained(name, local_files_only=True, **kwargs),
            AutoTokenizer.from_pretrained(name, local_files_only=True),
        )
    try:
        return (
            AutoModelForCausalLM.from_pretrained(name, local_files_only=True, **kwargs),
            AutoTokenizer.from_pretrained(name, local_files_only=True),
        )
    except (OSError, ValueError):
        pass  # not cached: a download is needed
    reason = hub_unavailable_reason(timeout_s)
    if reason is not None:
        raise RuntimeError(
            f"cannot load {name!r}: it is not in the local cache and {reason}. Download it on a "
            "machine with internet (huggingface-cli download NAME --local-dir DIR), copy DIR here "
            "and pass its path, or use the book's own model: stddial_book.rl.model.tiny_model()."
        )
    return (AutoModelForCausalLM.from_pretrained(name, **kwargs), AutoTokenizer.from_pretrained(name))


def _check_vocab(vocab: Sequence[str]) -> tuple[str, ...]:
    """The vocabulary as a tuple of distinct strings that holds <pad> and <eos>."""
    if isinstance(vocab, (str, bytes)) or not isinstance(vocab, Sequence):
        raise TypeError(f"vocab must be a sequence of token strings (like model.VOCAB); got {type(vocab).__name__}.")
    vocab = tuple(vocab)
    if not all(isinstance(t, str) and t for t in vocab):
        raise TypeError("vocab must hold non-empty strings, one per token.")
    if len(set(vocab)) != len(vocab):
        raise ValueError("vocab holds a token twice; each token needs one id.")
    missing = [t for t in (PAD, EOS) if t not in vocab]
    if missing:
        raise ValueError(f"vocab lacks {missing}; every vocabulary needs {PAD!r} and {EOS!r} (see model.VOCAB).")
    return vocab
