"""``DialDiagnostics``: the dial's numbers in any TRL ``GRPOTrainer``'s logs (chapters 14 and 15).

Usage::

    from stddial_book import DialDiagnostics
    trainer = GRPOTrainer(model, reward_funcs=[my_reward], args=config, train_dataset=data,
                          callbacks=[DialDiagnostics()])
    trainer.train()  # trainer.state.log_history, TensorBoard, W&B, trackio: dial/silent_fraction, ...

Where the numbers come from. On each generation batch TRL gathers every process's rewards (one column per
reward function) and the advantages it computed from them, and keeps the whole batch, on every process, for
its completion logs (``GRPOTrainer._logs``, the table behind ``log_completions``). The callback reads that
batch after each micro-step; it calls no TRL method, wraps no reward function and replaces nothing. It is
the one private name it touches, so it refuses in one line a TRL outside the versions that keep it as
described (:data:`DIAL_TRL_VERSIONS`; read in TRL's code from 0.20 to 1.9 and run on 1.16). The group size
G is the trainer's ``args.num_generations``; groups are G consecutive completions, as TRL's own normalisation
reads them. Because the batch is already gathered, every process computes the same numbers and logs them
(as TRL logs its own metrics on every process); the progress line is printed by the main process only.

Where the numbers go. On each log of the training loop the callback adds, under ``dial/``, the averages over
the generation batches since the last log (TRL averages its own metrics the same way): to ``logs``, which
every ``report_to`` backend writes, and to ``trainer.state.log_history``. To be seen by the backends it runs
first: at the start of training it moves itself to the front of the trainer's callbacks.
"""

from __future__ import annotations

import inspect
import re
import time
from typing import Any

import numpy as np

from stddial_book.bridges.lm_diagnostics import PASS_RATE_BANDS, batch_diagnostics
from stddial_book.theory.recipes import as_recipe, get_recipe

__all__ = ["DIAL_TRL_VERSIONS", "DialDiagnostics", "check_trl_version", "dial_log_keys"]

#: The TRL versions whose ``GRPOTrainer`` keeps each generation batch's gathered rewards and advantages
#: where :class:`DialDiagnostics` reads them: from (inclusive) and below (exclusive).
DIAL_TRL_VERSIONS = ("0.20", "2")

#: The numbers that are per-batch maxima rather than averages when several batches fall in one log.
_MAXIMA = ("advantage_gap", "identity_gap")


def _version_tuple(text: str) -> tuple[int, ...]:
    """``"1.16.0"`` as ``(1, 16, 0)``; a pre-release's tail (``"0rc1"``, ``"dev0"``) keeps its leading digits."""
    parts = []
    for piece in text.split(".")[:3]:
        match = re.match(r"\d+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
    return tuple(parts)


def check_trl_version(version: str) -> None:
    """Refuse, in one line, a TRL release outside :data:`DIAL_TRL_VERSIONS`; ``version`` is TRL's version
    string (``trl.__version__``, e.g. ``"1.16.0"``; a pre-release's tail is read by its leading digits)."""
    low, high = DIAL_TRL_VERSIONS
    if not _version_tuple(low) <= _version_tuple(version) < _version_tuple(high):
        raise RuntimeError(
            f"DialDiagnostics reads the rewards and advantages GRPOTrainer keeps for its completion logs, which "
            f"it has done as read here from TRL {low} up to (not including) {high}; this is TRL {version}: "
            f"pip install 'trl>={low},<{high}'."
        )


def _calling_trainer() -> Any:
    """The ``transformers.Trainer`` whose method is on the call stack (the one running this callback)."""
    from transformers import Trainer

    frame = inspect.currentframe()
    try:
        while frame is not None:
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, Trainer):
                return candidate
            frame = frame.f_back
    finally:
        del frame
    return None


def _trl_batch(trainer: Any) -> tuple[dict[str, list[float]], list[float]] | None:
    """TRL's last generation batch, gathered over processes: rewards by function name, and advantages."""
    logs = getattr(trainer, "_logs", None)
    if not isinstance(logs, dict) or "rewards" not in logs or "advantages" not in logs:
        return None
    return {name: list(values) for name, values in logs["rewards"].items()}, list(logs["advantages"])


def _base_recipe(args: Any) -> Any:
    """The book recipe whose advantages TRL computes under ``args`` (None where no book recipe is TRL's)."""
    if getattr(args, "multi_objective_aggregation", "sum_then_normalize") != "sum_then_normalize":
        return None
    scale = getattr(args, "scale_rewards", "group")
    if scale in (True, "group"):
        return get_recipe("grpo")
    if scale in (False, "none"):
        return get_recipe("dr_grpo")
    return None  # "batch": one std for the whole batch, no group weight to check


def _two_values(recipe: Any, total: np.ndarray, passed: np.ndarray) -> Any:
    """``recipe`` with its reward values set to the batch's, when passed and failed completions each have one."""
    right, wrong = np.unique(total[passed]), np.unique(total[~passed])
    correct = float(right[0]) if right.size == 1 else 1.0
    failed = float(wrong[0]) if wrong.size == 1 else (correct - 1.0 if right.size == 1 else 0.0)
    if right.size > 1 or wrong.size > 1 or not correct > failed:
        return recipe  # not two-valued as the recipe's verifier: batch_diagnostics says so
    return recipe.replace(reward_correct=correct, reward_wrong=failed)


def _flat(stats: dict[str, Any]) -> dict[str, float]:
    """The scalar ``dial/`` keys of one set of statistics (lists spread into one key per entry)."""
    out: dict[str, float] = {}
    for key, value in stats.items():
        if isinstance(value, (list, tuple)):
            names = _band_names() if key == "mass_by_band" else [str(i) for i in range(len(value))]
            out.update({f"dial/{key}/{name}": float(v) for name, v in zip(names, value)})
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"dial/{key}"] = float(value)
    return out


def _band_names() -> list[str]:
    edges = PASS_RATE_BANDS
    return [f"{lo:g}-{hi:g}" for lo, hi in zip(edges[:-1], edges[1:])]


def _combine(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Several batches' statistics as one: numbers and lists averaged, the gaps' maxima, notes kept."""
    out: dict[str, Any] = {}
    for key, first in batches[0].items():
        values = [b[key] for b in batches if b.get(key) is not None]
        if isinstance(first, str) or not values:
            out[key] = first
        elif key in _MAXIMA:
            out[key] = float(max(values))
        elif isinstance(first, list):
            out[key] = np.mean(np.asarray(values, dtype=float), axis=0).tolist()
        else:
            out[key] = float(np.mean(values))
    return out


def dial_log_keys(group_size: int) -> list[str]:
    """The ``dial/`` keys :class:`DialDiagnostics` writes into each training log, for groups of ``group_size``
    (``dial/identity_gap`` only where the closed form applies)."""
    keys = ["groups", "pass_rate", "silent_fraction", "zero_std_fraction", "sigma_mean", "mass_in_silent"]
    keys += ["advantage_gap", "identity_gap"]
    keys += [f"k_counts/{k}" for k in range(group_size + 1)] + [f"mass_by_band/{b}" for b in _band_names()]
    return [f"dial/{k}" for k in keys]


def _progress_line(record: dict[str, Any], max_steps: int) -> str:
    """One line of progress: step, pass rate, silent fraction, mean σ, time per step and left."""
    nan = float("nan")
    return (
        f"step {record['step']}/{max_steps}  pass {record.get('pass_rate', nan):.3f}  "
        f"silent {record.get('silent_fraction', nan):.2f}  mean sigma {record.get('sigma_mean', nan):.3f}  "
        f"{record['step_s']:.1f} s/step, {record['eta_s'] / 60:.1f} min left"
    )


def _callback_base() -> type:
    """``transformers.TrainerCallback``, or an ImportError that says how to install it."""
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise ImportError("DialDiagnostics is a transformers callback for TRL: pip install trl.") from None
    return TrainerCallback


class DialDiagnostics(_callback_base()):
    """A ``transformers.TrainerCallback`` that logs the dial (chapter 15) on every step of a TRL ``GRPOTrainer``.

    Pass it as TRL's own callbacks are passed, ``GRPOTrainer(..., callbacks=[DialDiagnostics()])``, or add it
    later with ``trainer.add_callback(DialDiagnostics())``; it works with any reward functions. Each training
    log then carries (averaged over the generation batches since the previous log):

    * ``dial/pass_rate``: the share of completions that passed (the verifier's reward above ``threshold``);
    * ``dial/silent_fraction``: the share of groups of G whose completions all passed or all failed
      (k = 0 or G, σ = 0): with one 0/1 reward this is TRL's own ``frac_reward_zero_std``;
    * ``dial/zero_std_fraction``: the share of groups whose total reward (TRL's weighted sum) does not vary,
      TRL's definition of ``frac_reward_zero_std`` (they differ when a format or length reward shapes it);
    * ``dial/sigma_mean``: the mean over groups of σ = sqrt(k(G − k))/G, and ``dial/k_counts/<k>``: the
      number of groups with k passes, k = 0..G;
    * ``dial/mass_by_band/<lo>-<hi>``: each pass-rate band's share of the update's advantage mass Σ|Aᵢ|,
      and ``dial/mass_in_silent``: the mass in silent groups (0 when TRL zeroes them; a shaped reward, such
      as DAPO's length penalty, can give a group silent by the verifier some);
    * ``dial/advantage_gap``: the largest difference between TRL's advantages and the book's for the
      recipe TRL runs; ``dial/identity_gap``: the largest |mean |A| − 2w(p̂)| over groups, where the
      identity's closed form applies (two-valued rewards; chapter 3).

    ``records`` keeps one dict per optimizer step with the same numbers (lists unsplit, plus progress:
    ``elapsed_s`` since this process began training, ``step_s`` the mean seconds of the steps it has trained,
    a resumed run's earlier steps not counted, and ``eta_s`` the time left at that pace).

    ``verifier`` is the reward function that says whether a completion passed, by its TRL name (its
    ``__name__``) or position in ``reward_funcs``; the first (0) by default. A completion passes when the
    verifier's reward is above ``threshold`` (the default 0 reads the book's 0/1 and DAPO's ±1 rewards
    alike). ``recipe`` is the book recipe the run sets TRL to (``"grpo"``, ``"dr_grpo"``, ``"dapo"`` or a
    ``Recipe``) for the identity checks; by default (``None``) the one TRL's ``scale_rewards`` computes.
    ``group_size`` is optional; when given it must equal the trainer's ``num_generations`` (the callback
    always reads G from the trainer). ``print_every`` prints a progress line every this many optimizer
    steps (main process only); 0, the default, prints nothing. ``trainer`` is the trainer, where it cannot
    be found on the call stack (a trainer of one's own making); by default it is found there.
    """

    def __init__(
        self,
        verifier: str | int = 0,
        threshold: float = 0.0,
        recipe: Any = None,
        group_size: int | None = None,
        print_every: int = 0,
        trainer: Any = None,
    ) -> None:
        self.verifier, self.threshold, self.print_every = verifier, float(threshold), int(print_every)
        self.recipe = None if recipe is None else as_recipe(recipe)
        self.group_size = group_size
        self.records: list[dict[str, Any]] = []
        self._given, self._trainer = trainer, None
        self._window: list[dict[str, Any]] = []  # batches since the last log
        self._step_batches: list[dict[str, Any]] = []  # batches since the last optimizer step
        self._seen: Any = None
        self._start = time.perf_counter()
        self._begun_at = 0

    # -- setting up -------------------------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        trainer = self._given or _calling_trainer()  # the trainer now training (one callback, several runs)
        self._check_trainer(trainer, args)
        self._trainer = trainer
        callbacks = trainer.callback_handler.callbacks
        callbacks[:] = [self] + [c for c in callbacks if c is not self]  # first, so report_to sees dial/
        self._window, self._step_batches = [], []
        self._mark_seen()
        self._start = time.perf_counter()
        self._begun_at = int(getattr(state, "global_step", 0) or 0)  # a resumed run begins past step 0

    def _check_trainer(self, trainer: Any, args: Any) -> None:
        import trl

        if trainer is None:
            raise RuntimeError(
                "DialDiagnostics found no Trainer running it; pass it: DialDiagnostics(trainer=trainer)."
            )
        check_trl_version(trl.__version__)
        if _trl_batch(trainer) is None or not hasattr(args, "num_generations"):
            raise RuntimeError(
                f"DialDiagnostics needs a TRL GRPOTrainer (which keeps its gathered rewards and advantages); "
                f"got a {type(trainer).__name__}: pass the callback to GRPOTrainer(..., callbacks=[...])."
            )
        if self.group_size is not None and self.group_size != args.num_generations:
            raise ValueError(
                f"DialDiagnostics(group_size={self.group_size}) but the trainer's num_generations is "
                f"{args.num_generations}: drop group_size (it is read from the trainer) or set num_generations."
            )
        names = list(getattr(trainer, "reward_func_names", []))
        if len(set(names)) < len(names):
            raise ValueError(
                f"two reward functions share a name in {names}, so TRL logs them in one column: "
                "give each its own __name__ for DialDiagnostics."
            )
        if isinstance(self.verifier, str) and self.verifier not in names:
            raise ValueError(
                f"DialDiagnostics(verifier={self.verifier!r}) names no reward function; choose from {names}."
            )
        if isinstance(self.verifier, int) and not 0 <= self.verifier < len(names):
            raise ValueError(
                f"DialDiagnostics(verifier={self.verifier}) but the trainer has {len(names)} reward functions."
            )

    def _mark_seen(self) -> None:
        """Take TRL's current batch as read (a batch from before training, or an evaluation's)."""
        advantages = self._trainer._logs["advantages"]
        self._seen = advantages[0] if len(advantages) else None

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is not None:
            self._mark_seen()  # TRL's evaluation batches go into the same logs: not the training's

    # -- reading each generation batch ------------------------------------------------------------------

    def _observe(self, args: Any) -> None:
        """Read TRL's batch if it is a new one: TRL replaces every entry (new objects) on each generation."""
        advantages = self._trainer._logs["advantages"]
        if not len(advantages) or advantages[0] is self._seen:
            return
        self._seen = advantages[0]
        stats = self._batch_stats(args)
        self._window.append(stats)
        self._step_batches.append(stats)

    def _batch_stats(self, args: Any) -> dict[str, Any]:
        trainer, group_size = self._trainer, int(args.num_generations)
        rewards, advantages = _trl_batch(trainer)
        names = list(trainer.reward_func_names)
        if any(len(rewards[n]) != len(advantages) for n in names):
            raise ValueError(
                f"TRL's reward columns {names} do not line up with its {len(advantages)} advantages: "
                f"use TRL >={DIAL_TRL_VERSIONS[0]},<{DIAL_TRL_VERSIONS[1]} with reward functions of distinct names."
            )
        columns = np.array([rewards[n] for n in names], dtype=float)
        verifier = names.index(self.verifier) if isinstance(self.verifier, str) else self.verifier
        passed = columns[verifier] > self.threshold  # an unscored completion (NaN) did not pass
        weights = np.asarray(trainer.reward_weights.detach().cpu(), dtype=float)
        total = np.nansum(columns * weights[:, None], axis=0)
        base = self.recipe or _base_recipe(args) or get_recipe("grpo")
        recipe = base if self.recipe is not None else _two_values(base, total, passed)
        stats = batch_diagnostics(passed, total, advantages, group_size, recipe)
        spread = total.reshape(-1, group_size).std(axis=1, ddof=1) if group_size > 1 else np.zeros(1)
        stats["zero_std_fraction"] = float(np.mean(np.isclose(spread, 0.0)))
        if self.recipe is None and _base_recipe(args) is None:  # batch-scaled: no book recipe to compare with
            stats["advantage_gap"], stats["identity_gap"] = None, None
            stats["identity_note"] = "TRL scales by the batch's std, not the group's: no per-group weight"
        for i, name in enumerate(names):
            if i != verifier:
                stats[f"reward_{name}"] = float(np.nanmean(columns[i]))
        return stats

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is not None:
            self._observe(args)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._trainer is None:
            return
        self._observe(args)
        record: dict[str, Any] = {"step": int(state.global_step)}
        if self._step_batches:
            record.update(_combine(self._step_batches))
        self._step_batches = []
        elapsed = time.perf_counter() - self._start
        per_step = elapsed / max(state.global_step - self._begun_at, 1)  # the steps this process has trained
        eta = per_step * max(state.max_steps - state.global_step, 0)
        record.update(elapsed_s=elapsed, step_s=per_step, eta_s=eta)
        self.records.append(record)
        if self.print_every and state.global_step % self.print_every == 0 and state.is_world_process_zero:
            print(_progress_line(record, state.max_steps), flush=True)

    # -- writing into TRL's log -------------------------------------------------------------------------

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        if logs is None or not self._window or "train_runtime" in logs or any(k.startswith("eval_") for k in logs):
            return
        values = _flat(_combine(self._window))
        self._window = []
        logs.update(values)
        history = state.log_history
        if history and history[-1].get("step") == state.global_step:
            history[-1].update(values)  # the Trainer stored its copy of logs before calling the callbacks
        if self.records and self.records[-1]["step"] == state.global_step and "completions/mean_length" in logs:
            self.records[-1]["mean_length"] = float(logs["completions/mean_length"])
