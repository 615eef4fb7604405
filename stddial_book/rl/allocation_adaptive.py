"""Allocation rules that sample in rounds and decide from what they see (Part V).

* :class:`DynamicSampling`: DAPO's dynamic sampling (Yu et al. 2025, arXiv 2503.14476).
* :class:`SpeedScreening`: SPEED's screen-then-continue (Zhang et al. 2025, arXiv 2506.09016).
* :class:`ReinforceAda`: Reinforce-Ada's sampling until both outcomes show (Xiong et al. 2025,
  arXiv 2510.04996).

Each has ``allocate(state, budget, draw, rng, candidates)``; none draws more than ``budget`` samples.
They read ``state`` only through the candidates; the caller records what they saw afterwards
(:func:`stddial_book.rl.allocation.record_allocation`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stddial_book.core.checks import check_int
from stddial_book.rl.allocation_base import Allocation, Draw, run_draw
from stddial_book.rl.pool_state import PoolState
from stddial_book.rl.sampling import MAX_ROUNDS, DynamicSampler

__all__ = ["DynamicSampling", "SpeedScreening", "ReinforceAda"]


def check_sizes(rule: object, minimums: dict[str, int]) -> None:
    """Check the named fields of ``rule`` are whole numbers at or above their minimum (None allowed
    for a field whose minimum is given as a negative number: it means "no limit")."""
    for name, minimum in minimums.items():
        value = getattr(rule, name)
        if value is None and minimum < 0:
            continue
        object.__setattr__(rule, name, check_int(value, name, minimum=abs(minimum)))


def _split_silent(sizes: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """True for mixed groups (0 < k < G)."""
    return (correct > 0) & (correct < sizes)


@dataclass(frozen=True)
class DynamicSampling:
    """DAPO's dynamic sampling (Yu et al. 2025): draw groups of G, keep the mixed ones, refill until
    ``batch_prompts`` groups are kept, ``max_rounds`` rounds have run, or the budget or the candidates
    run out. Each round draws fresh prompts: the number still missing (the book's trainer), or
    ``round_prompts`` if set (verl's fixed generation batch, whose extra mixed groups are surplus).
    Silent groups are discarded (counted in ``discarded_silent``), surplus ones too. ``group_size``
    is G, the samples per group (at least 2). The rounds are run by the engine's refill,
    :meth:`~stddial_book.rl.sampling.DynamicSampler.fill`, which sees each group's k as G flags of
    correctness; it keeps the first mixed groups drawn, as many as are missing."""

    group_size: int = 8
    batch_prompts: int = 16
    max_rounds: int = 8
    round_prompts: int | None = None

    def __post_init__(self) -> None:
        check_sizes(self, {"group_size": 2, "batch_prompts": 1, "max_rounds": 1, "round_prompts": -1})

    def allocate(self, state: PoolState, budget: int, draw: Draw, rng, candidates: np.ndarray) -> Allocation:
        order = rng.permutation(candidates)
        record, used, G = Allocation(), 0, self.group_size

        def one_round(round_index: int, missing: int) -> tuple[np.ndarray, np.ndarray]:
            """The next prompts of ``order`` (those ``missing``, or ``round_prompts``, as far as the
            budget pays), drawn into ``record``; per sample, its group's place among ``record``'s
            draws and a 0/1 flag, the group's first k samples correct. No prompt left: an empty round."""
            nonlocal used
            wanted = missing if self.round_prompts is None else self.round_prompts
            affordable = (budget - record.generated) // G
            ids = order[used : used + min(wanted, affordable)]
            used += ids.size
            k = run_draw(draw, ids, np.full(ids.size, G), record)  # no ids: no call, no round recorded
            first = record.drawn_prompts.size - ids.size
            return np.repeat(np.arange(first, first + ids.size), G), (np.arange(G) < k[:, None]).reshape(-1)

        # each round that draws takes new prompts of the order, so rounds past order.size would draw
        # nothing (and the sampler runs at most MAX_ROUNDS)
        rounds = min(self.max_rounds, max(order.size, 1), MAX_ROUNDS)
        parts, cost = DynamicSampler(self.batch_prompts, G, rounds).fill(one_round)
        kept = np.concatenate(parts)[::G] if parts else np.zeros(0, dtype=np.int64)
        record.keep(record.drawn_prompts[kept], record.drawn_sizes[kept], record.drawn_correct[kept])
        record.discarded_silent, record.discarded_surplus = cost.samples_silent, cost.samples_surplus
        return record


@dataclass(frozen=True)
class SpeedScreening:
    """SPEED (Zhang et al. 2025): screen each prompt with ``screen_size`` samples; a prompt whose
    screen is mixed (pass rate strictly between 0 and 1, SPEED's test: a non-zero reward std) gets
    ``continue_size`` more, and its group for the update is all of them (screen included, G = 4 + 20
    in SPEED's scripts). Screening runs in rounds of ``round_prompts`` prompts until ``batch_prompts``
    prompts are kept (default: no limit) or the budget or candidates run out. Silent screens are
    discarded; a mixed screen that cannot be continued (batch full, budget short) is surplus."""

    screen_size: int = 4
    continue_size: int = 20
    round_prompts: int = 16
    batch_prompts: int | None = None

    def __post_init__(self) -> None:
        check_sizes(self, {"screen_size": 2, "continue_size": 1, "round_prompts": 1, "batch_prompts": -1})

    def allocate(self, state: PoolState, budget: int, draw: Draw, rng, candidates: np.ndarray) -> Allocation:
        order = rng.permutation(candidates)
        record, used = Allocation(), 0
        limit = np.inf if self.batch_prompts is None else self.batch_prompts
        while used < order.size and len(record.prompts) < limit:
            affordable = (budget - record.generated) // self.screen_size
            ids = order[used : used + min(self.round_prompts, affordable)]
            if ids.size == 0:
                break
            used += ids.size
            screen = np.full(ids.size, self.screen_size)
            k_screen = run_draw(draw, ids, screen, record)
            mixed = _split_silent(screen, k_screen)
            record.discarded_silent += int(screen[~mixed].sum())
            self._continue(ids[mixed], k_screen[mixed], budget, limit, draw, record)
        return record

    def _continue(self, ids, k_screen, budget: int, limit: float, draw: Draw, record: Allocation) -> None:
        """Give the mixed-screened prompts their continuation, as far as the batch and budget allow."""
        room = min(limit - len(record.prompts), (budget - record.generated) // self.continue_size)
        room = int(max(room, 0))
        go, stop = ids[:room], ids[room:]
        record.discarded_surplus += int(stop.size * self.screen_size)
        if go.size:
            k_more = run_draw(draw, go, np.full(go.size, self.continue_size), record)
            total = self.screen_size + self.continue_size
            record.keep(go, np.full(go.size, total), k_screen[:room] + k_more)


@dataclass(frozen=True)
class ReinforceAda:
    """Reinforce-Ada, balanced variant (Xiong et al. 2025; RLHFlow/Reinforce-Ada): every active
    prompt draws ``round_size`` samples per round; it stops once it has at least ⌊final/2⌋ correct
    and final − ⌊final/2⌋ wrong samples (``final_size`` = 2 reads "until both outcomes have
    appeared"), or after ``max_rounds``. Its update group is then ``final_size`` samples, balanced;
    the rest are surplus. A prompt still unfinished keeps as balanced a group as it has, and is
    discarded as silent if it never saw both outcomes. ``batch_prompts`` (default: as many as the
    budget affords for every round) prompts are started."""

    round_size: int = 8
    max_rounds: int = 4
    final_size: int = 4
    batch_prompts: int | None = None

    def __post_init__(self) -> None:
        check_sizes(self, {"round_size": 1, "max_rounds": 1, "final_size": 2, "batch_prompts": -1})

    def allocate(self, state: PoolState, budget: int, draw: Draw, rng, candidates: np.ndarray) -> Allocation:
        start = budget // (self.round_size * self.max_rounds) if self.batch_prompts is None else self.batch_prompts
        ids = rng.permutation(candidates)[: max(start, 0)]
        record = Allocation()
        pos, neg = np.zeros(ids.size, dtype=np.int64), np.zeros(ids.size, dtype=np.int64)
        active = np.ones(ids.size, dtype=bool)
        for _ in range(self.max_rounds):
            affordable = (budget - record.generated) // self.round_size
            rows = np.flatnonzero(active)[:affordable]
            if rows.size == 0:
                break
            k = run_draw(draw, ids[rows], np.full(rows.size, self.round_size), record)
            pos[rows] += k
            neg[rows] += self.round_size - k
            active[rows] &= ~self._finished(pos[rows], neg[rows])
        self._form_groups(ids, pos, neg, record)
        return record

    def _finished(self, pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
        half = self.final_size // 2
        return (pos >= half) & (neg >= self.final_size - half)

    def _form_groups(self, ids, pos, neg, record: Allocation) -> None:
        """Each drawn prompt's update group: up to ``final_size`` samples, as balanced as its counts allow."""
        take_pos = np.minimum(self.final_size // 2, pos)
        take_neg = np.minimum(self.final_size - take_pos, neg)
        take_pos = np.minimum(pos, self.final_size - take_neg)
        seen = pos + neg
        usable = (take_pos > 0) & (take_neg > 0)
        record.keep(ids[usable], (take_pos + take_neg)[usable], take_pos[usable])
        record.discarded_silent += int(seen[~usable].sum())
        record.discarded_surplus += int((seen - take_pos - take_neg)[usable].sum())
