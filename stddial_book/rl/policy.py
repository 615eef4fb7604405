"""The policy the engine trains, behind one interface (chapters 9-16).

The trainer (:func:`stddial_book.rl.trainer.train`), the evaluation and the checkpoints ask a policy
for the same few things, whatever model it holds:

* ``model``: the causal LM the sampler (:func:`~stddial_book.rl.rollout.sample`, a KV cache and left
  padding) and the loss (:func:`~stddial_book.rl.rollout.shared_prompt_logprobs`, per-token
  log-probabilities of completions) call; ``pad_id`` and ``eos_id``;
* its prompts: :meth:`Policy.encode` (left-padded ids and mask), :meth:`Policy.decode`,
  :meth:`Policy.verify` (1 correct, 0 wrong) and :meth:`Policy.bucket` (a problem's difficulty label),
  with :meth:`Policy.check_problems` refusing what it cannot prompt;
* its weights: :meth:`Policy.trainable_parameters` (what the optimizer moves),
  :meth:`Policy.save_weights` and :meth:`Policy.load_weights` (the checkpoints), and
  :meth:`Policy.reference` (π_ref of the KL term);
* :meth:`Policy.describe`, what the run log records of it (``None``: nothing beyond the model's config).

:class:`CharPolicy` is the testbed's model with its character codec and the addition task's verifier:
exactly what the trainer did before the interface existed, so its runs are bit for bit the same.
:class:`stddial_book.rl.hf_policy.HFPolicy` is any Hugging Face causal LM with a tokenizer, a chat
template, LoRA adapters and a verifier. :func:`as_policy` turns what
:func:`~stddial_book.rl.trainer.train` is given (a policy, or a torch module and an optional codec)
into one.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from stddial_book.rl.batches import bucket_of, encode_prompts
from stddial_book.rl.configs import require_model, require_problems
from stddial_book.rl.model import CharCodec
from stddial_book.rl.tasks import Problem
from stddial_book.rl.tasks import rewards as task_rewards

__all__ = ["Policy", "CharPolicy", "as_policy"]


class Policy:
    """The interface: what the engine needs of a model it samples from and trains (see the module)."""

    model: torch.nn.Module
    pad_id: int
    eos_id: int
    #: Prompts :func:`~stddial_book.rl.evaluate.evaluate` samples in one pass (its KV cache grows with it).
    eval_chunk: int = 256

    def check_problems(self, problems: Any, name: str, allow_empty: bool = False) -> list[Any]:
        """``problems`` as a list, after checking this policy can prompt and verify each."""
        raise NotImplementedError

    def encode(self, problems: Sequence[Any], device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded prompt ids (B, P) and their mask (bool, false on padding)."""
        raise NotImplementedError

    def decode(self, completion_ids: torch.Tensor) -> list[str]:
        """Each completion row as the text its verifier reads (up to its first EOS)."""
        raise NotImplementedError

    def verify(self, completions: Sequence[str], problems: Sequence[Any]) -> np.ndarray:
        """Correctness, 1.0 or 0.0 per completion (float64), problems aligned with completions."""
        raise NotImplementedError

    def bucket(self, problem: Any) -> str:
        """A problem's difficulty bucket (the metrics' ``/D2``-style suffix)."""
        raise NotImplementedError

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The parameters the optimizer moves, in the model's order."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def save_weights(self, path: str | os.PathLike) -> None:
        """Write the trainable weights to ``path`` (safetensors)."""
        raise NotImplementedError

    def load_weights(self, path: str | os.PathLike, device: torch.device | str) -> None:
        """Read back what :meth:`save_weights` wrote; a ``RuntimeError`` naming a shape mismatch otherwise."""
        raise NotImplementedError

    def reference(self, init_path: str | os.PathLike) -> Any:
        """A frozen π_ref at the starting weights (``init_path`` holds what :meth:`save_weights` wrote then)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any] | None:
        """What the run's provenance and checkpoint fingerprint record of the policy (None: nothing)."""
        return None


class CharPolicy(Policy):
    """The testbed's model (:func:`~stddial_book.rl.model.tiny_model`) with its character codec, prompting
    addition problems (:class:`~stddial_book.rl.tasks.Problem`) and verifying them with the task's exact
    verifier (the answer, then EOS). Every method is the call the trainer made before this interface.
    ``model`` is the testbed's torch module and ``codec`` its :class:`~stddial_book.rl.model.CharCodec`
    (``None``: a fresh one)."""

    def __init__(self, model: torch.nn.Module, codec: CharCodec | None = None) -> None:
        self.model = model
        self.codec = CharCodec() if codec is None else codec

    @property
    def pad_id(self) -> int:
        return self.codec.pad_id

    @property
    def eos_id(self) -> int:
        return self.codec.eos_id

    def check_problems(self, problems: Any, name: str, allow_empty: bool = False) -> list[Problem]:
        return require_problems(problems, name, allow_empty=allow_empty)

    def encode(self, problems: Sequence[Problem], device: torch.device | str = "cpu"):
        return encode_prompts(problems, self.codec, device)

    def decode(self, completion_ids: torch.Tensor) -> list[str]:
        return [self.codec.decode(row) for row in completion_ids.tolist()]

    def verify(self, completions: Sequence[str], problems: Sequence[Problem]) -> np.ndarray:
        return task_rewards(completions, problems)

    def bucket(self, problem: Problem) -> str:
        return bucket_of(problem)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return list(self.model.parameters())

    def save_weights(self, path: str | os.PathLike) -> None:
        from safetensors.torch import save_model

        save_model(self.model, str(path))

    def load_weights(self, path: str | os.PathLike, device: torch.device | str) -> None:
        from safetensors.torch import load_model

        load_model(self.model, str(path), device=str(device))

    def reference(self, init_path: str | os.PathLike) -> torch.nn.Module:
        from safetensors.torch import load_model

        ref_model = copy.deepcopy(self.model)
        load_model(ref_model, str(init_path))
        ref_model.eval().requires_grad_(False)
        return ref_model


def as_policy(model: Any, codec: Any = None) -> Policy:
    """The policy of what :func:`~stddial_book.rl.trainer.train` or :func:`~stddial_book.rl.evaluate.evaluate`
    was given: a :class:`Policy` as it is, or the testbed's torch module with ``codec`` (default
    :class:`~stddial_book.rl.model.CharCodec`) as a :class:`CharPolicy`. A policy given as ``codec``
    (the trainer's internal calls) is returned as it is. ``model`` is that policy or torch module."""
    if isinstance(codec, Policy):
        return codec
    if isinstance(model, Policy):
        if codec is not None:
            raise ValueError(
                "a Policy brings its own tokenizer; pass codec only with the testbed's model (a torch module)."
            )
        return model
    require_model(model)
    return CharPolicy(model, codec)
