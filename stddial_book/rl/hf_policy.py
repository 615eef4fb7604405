"""Any Hugging Face causal LM as the engine's policy, with LoRA adapters (chapters 15 and 16).

:func:`hf_policy` loads a model and its tokenizer from a local folder (never the hub: a model the book
trains is on disk, such as :func:`stddial_book.bridges.smollm2.smollm2_model_dir`), or takes them as
objects, and wraps the model in LoRA adapters with ``peft`` (Hu et al., 2021): rank ``lora_r``, scale
``lora_alpha``, on every linear layer but the output head, no dropout, in float32. Only the adapters are
trainable; the base weights stay frozen, so a checkpoint holds the adapters alone.

:class:`HFPolicy` is the :class:`~stddial_book.rl.policy.Policy` the trainer drives:

* prompts: each :class:`~stddial_book.rl.text_tasks.TextProblem`'s question as a chat (the system
  prompt, if any, then the question) through the tokenizer's chat template with the generation prompt,
  tokenised as TRL's ``GRPOTrainer`` tokenises a conversational prompt, left-padded with the pad id;
* sampling and log-probabilities: the engine's own (:func:`~stddial_book.rl.rollout.sample`, a KV cache
  shared by each prompt's samples; :func:`~stddial_book.rl.rollout.shared_prompt_logprobs`) on the model
  with its adapters injected, so the forward pass is the transformers model's own;
* verification: ``verifier(completions, problems)``, by default
  :func:`~stddial_book.rl.text_tasks.verify_last_number` on the decoded completions;
* π_ref: the model with its adapters switched off, which is the starting policy while the adapters are
  fresh (LoRA starts with B = 0), as TRL does for a new adapter.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stddial_book.core.checks import check_int
from stddial_book.core.transformers_compat import dtype_argument
from stddial_book.rl.policy import Policy
from stddial_book.rl.text_tasks import TextProblem, verify_last_number

__all__ = ["HFPolicy", "hf_policy"]


def _import_peft() -> Any:
    """``peft``, or an ImportError in one line naming how to install it."""
    try:
        import peft
    except ImportError:
        raise ImportError(
            "an HFPolicy trains LoRA adapters with peft, which is not installed: pip install peft."
        ) from None
    return peft


def _load(folder: str | os.PathLike, dtype: torch.dtype) -> tuple[Any, Any]:
    """The model and tokenizer of a local ``save_pretrained`` folder, never from the hub."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(folder)
    if not (path / "config.json").is_file():
        raise ValueError(
            f"{path} is not a local model folder (no config.json); pass a save_pretrained folder, e.g. "
            "stddial_book.bridges.smollm2.smollm2_model_dir()."
        )
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **dtype_argument(dtype))
    return model, tokenizer


def hf_policy(
    model: Any,
    tokenizer: Any = None,
    *,
    lora_r: int = 16,
    lora_alpha: int = 32,
    system_prompt: str | None = None,
    verifier: Callable[[Sequence[str], Sequence[Any]], np.ndarray] | None = None,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> HFPolicy:
    """An :class:`HFPolicy` of ``model`` (a local folder, or a transformers causal LM with ``tokenizer``) with
    fresh LoRA adapters (rank ``lora_r``, scale ``lora_alpha``, every linear layer, adapters initialised from
    ``seed`` without touching the global random state), in ``dtype`` (float32 unless a test asks for float64).
    ``system_prompt`` is the chat's system message (``None``: none) and ``verifier`` the function
    ``(completions, problems) -> 0/1 array`` that scores the decoded completions (``None``:
    :func:`~stddial_book.rl.text_tasks.verify_last_number`).
    """
    peft = _import_peft()
    lora_r = check_int(lora_r, "lora_r", minimum=1, hint="LoRA's rank; the book's SmolLM2 runs use 16.")
    lora_alpha = check_int(lora_alpha, "lora_alpha", minimum=1, hint="LoRA's scale; the book's SmolLM2 runs use 32.")
    seed = check_int(seed, "seed", minimum=0)
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"dtype must be a floating torch dtype such as torch.float32; got {dtype!r}.")
    name = None
    if isinstance(model, (str, os.PathLike)):
        if tokenizer is not None:
            raise ValueError("a model folder brings its own tokenizer; pass tokenizer only with a model object.")
        name = str(model)
        model, tokenizer = _load(model, dtype)
    elif not (isinstance(model, torch.nn.Module) and callable(getattr(model, "get_input_embeddings", None))):
        raise TypeError(f"model must be a local model folder or a transformers causal LM; got {type(model).__name__}.")
    elif tokenizer is None:
        raise ValueError("a model object needs its tokenizer: hf_policy(model, tokenizer).")
    model = model.to(dtype)
    config = peft.LoraConfig(
        r=lora_r, lora_alpha=lora_alpha, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
    )
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        torch.manual_seed(seed)
        wrapped = peft.get_peft_model(model, config)
    lora = {"lora_r": lora_r, "lora_alpha": lora_alpha, "target_modules": "all-linear", "seed": seed}
    return HFPolicy(wrapped, tokenizer, system_prompt=system_prompt, verifier=verifier, name=name, lora=lora)


class HFPolicy(Policy):
    """A Hugging Face causal LM wrapped in LoRA adapters (a ``peft`` model), its tokenizer and a verifier.

    Build one with :func:`hf_policy`. ``model`` is the transformers model with the adapters injected (what
    the sampler and the loss call); ``peft_model`` the ``peft`` wrapper around it.

    ``tokenizer`` is the model's tokenizer (it needs a chat template; its pad id, or else its EOS id,
    pads); ``system_prompt`` and ``verifier`` are as for :func:`hf_policy`; ``name`` is the model's name
    in the run log (``None``: the model config's ``_name_or_path``, else its class name); ``lora`` holds
    the adapter settings the log records (``None``: none).
    """

    #: Prompts evaluated in one sampling pass (a real model's KV cache is far larger than the testbed's).
    eval_chunk = 16

    def __init__(
        self,
        peft_model: Any,
        tokenizer: Any,
        *,
        system_prompt: str | None = None,
        verifier: Callable[[Sequence[str], Sequence[Any]], np.ndarray] | None = None,
        name: str | None = None,
        lora: dict[str, Any] | None = None,
    ) -> None:
        if not callable(getattr(peft_model, "get_base_model", None)):
            raise TypeError("peft_model must be a peft model (peft.get_peft_model); build the policy with hf_policy().")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(f"system_prompt must be text or None; got {type(system_prompt).__name__}.")
        if verifier is not None and not callable(verifier):
            raise TypeError(f"verifier must be a function (completions, problems) -> 0/1 array; got {verifier!r:.40}.")
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the tokenizer has no chat template; an HFPolicy prompts a chat (instruct) model.")
        self.peft_model = peft_model
        self.model = peft_model.get_base_model()
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.verifier = verify_last_number if verifier is None else verifier
        self.name = name or str(getattr(self.model.config, "_name_or_path", "") or type(self.model).__name__)
        self.lora = dict(lora or {})
        self.eos_id = int(tokenizer.eos_token_id)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id)
        self._prompt_ids: dict[tuple[str | None, str], list[int]] = {}

    def check_problems(self, problems: Any, name: str, allow_empty: bool = False) -> list[TextProblem]:
        if isinstance(problems, (str, bytes)) or not hasattr(problems, "__len__"):
            raise TypeError(
                f"{name} must be a list of TextProblem (text_tasks.read_text_problems); got {type(problems).__name__}."
            )
        problems = list(problems)
        if not problems and not allow_empty:
            raise ValueError(f"{name} is empty; pass at least one TextProblem.")
        wrong = next((p for p in problems if not isinstance(p, TextProblem)), None)
        if wrong is not None:
            raise TypeError(
                f"{name} must hold TextProblem objects for a Hugging Face policy, not {type(wrong).__name__} "
                f"{wrong!r:.40}; read them with text_tasks.read_text_problems."
            )
        return problems

    def prompt_ids(self, problem: TextProblem) -> list[int]:
        """The token ids of ``problem``'s chat prompt (system prompt, question, generation prompt), cached."""
        key = (self.system_prompt, problem.question)
        ids = self._prompt_ids.get(key)
        if ids is None:
            messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            messages.append({"role": "user", "content": problem.question})
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = self._prompt_ids[key] = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return ids

    def encode(self, problems: Sequence[TextProblem], device: torch.device | str = "cpu"):
        encoded = [self.prompt_ids(p) for p in self.check_problems(problems, "problems")]
        width = max(len(e) for e in encoded)
        ids = torch.full((len(encoded), width), self.pad_id, dtype=torch.long)  # cpu-then-move
        mask = torch.zeros((len(encoded), width), dtype=torch.bool)  # cpu-then-move
        for row, e in enumerate(encoded):
            ids[row, width - len(e) :] = torch.tensor(e)  # cpu-then-move
            mask[row, width - len(e) :] = True
        return ids.to(device), mask.to(device)

    def decode(self, completion_ids: torch.Tensor) -> list[str]:
        rows = []
        for row in completion_ids.tolist():
            rows.append(row[: row.index(self.eos_id) + 1] if self.eos_id in row else row)
        return self.tokenizer.batch_decode(rows, skip_special_tokens=True)

    def verify(self, completions: Sequence[str], problems: Sequence[TextProblem]) -> np.ndarray:
        out = np.asarray(self.verifier(list(completions), list(problems)), dtype=np.float64)
        if out.shape != (len(completions),) or not np.isin(out, (0.0, 1.0)).all():
            raise ValueError(
                f"the verifier must return one 0 or 1 per completion ({len(completions)}); got {out!r:.60}."
            )
        return out

    def bucket(self, problem: TextProblem) -> str:
        return problem.tier

    def _trainable(self) -> dict[str, torch.nn.Parameter]:
        return {name: p for name, p in self.model.named_parameters() if p.requires_grad}

    def save_weights(self, path: str | os.PathLike) -> None:
        from safetensors.torch import save_file

        save_file({name: p.detach().cpu().contiguous() for name, p in self._trainable().items()}, str(path))

    def load_weights(self, path: str | os.PathLike, device: torch.device | str) -> None:
        from safetensors.torch import load_file

        saved, mine = load_file(str(path), device=str(device)), self._trainable()
        if set(saved) != set(mine) or any(saved[k].shape != mine[k].shape for k in mine):
            raise RuntimeError(
                f"Error(s) in loading state_dict: the adapters in {path} are not this policy's (size mismatch)."
            )
        with torch.no_grad():
            for name, param in mine.items():
                param.copy_(saved[name])

    def reference(self, init_path: str | os.PathLike) -> torch.nn.Module:
        return _AdaptersOff(self)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "hf",
            "model": self.name,
            "model_type": getattr(self.model.config, "model_type", None),
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "lora": self.lora,
            "trainable_parameters": sum(p.numel() for p in self._trainable().values()),
            "system_prompt": self.system_prompt,
            "verifier": getattr(self.verifier, "__name__", type(self.verifier).__name__),
            "eos_id": self.eos_id,
            "pad_id": self.pad_id,
        }


class _AdaptersOff(torch.nn.Module):
    """π_ref of an :class:`HFPolicy`: its model called with the LoRA adapters switched off (the base model)."""

    def __init__(self, policy: HFPolicy) -> None:
        super().__init__()
        self._policy = [policy]  # a list: not registered as a submodule, so no parameter is listed twice
        self.config = policy.model.config

    def get_input_embeddings(self) -> torch.nn.Module:
        return self._policy[0].model.get_input_embeddings()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past_key_values: Any = None,
        use_cache: bool | None = None,
        logits_to_keep: int = 0,
    ) -> Any:
        policy = self._policy[0]
        with policy.peft_model.disable_adapter():
            return policy.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=past_key_values,
                use_cache=use_cache,
                logits_to_keep=logits_to_keep,
            )
