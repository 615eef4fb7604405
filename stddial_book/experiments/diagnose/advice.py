"""What ``python -m stddial_book diagnose`` recommends for a pool: which prompts to prune, the group size the
group-size law asks for on the rest, the silent fraction that leaves, and how sure the pruning is; and the
file of the kept prompts' ids (``--kept-ids FILE``), written once into a new file.

A prompt solved in none (or all) of its n samples gives a silent group at every G while its p is what
was measured, so pruning it costs nothing now; but k = 0 of n only bounds p below 1 − 0.05^(1/n)
(one-sided 95%, Clopper and Pearson: 0.31 at n = 8, 0.17 at n = 16), so a pruned prompt may be
learnable. Chapter 16 gives the procedure; chapter 5 the law G* = 1/(8εp(1 − p)).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from stddial_book.core.checks import printable
from stddial_book.core.outdir import expand_path
from stddial_book.corpora.reader_pool import ReaderPool
from stddial_book.theory.group_size import group_size_law
from stddial_book.theory.silent import silent_probability

__all__ = ["PRUNE_CONFIDENCE", "recommendation", "recommendation_lines", "kept_ids", "check_new_file", "write_kept_ids"]

#: The one-sided confidence of the bound on a pruned prompt's solve rate.
PRUNE_CONFIDENCE = 0.95

#: Above this G the recommendation states the law's G* but no silent fraction (the pool is too sparse to train).
_LARGEST_ADVISED_G = 10**6


def recommendation(pool: ReaderPool, epsilon: float) -> dict[str, Any]:
    """Prune the prompts with p = 0 or p = 1 (k = 0 or k = n); train the rest with G = ⌈G*⌉ at their
    median p (:func:`stddial_book.theory.group_size.group_size_law`); the silent fraction
    mean(p^G + (1 − p)^G) at that G over the whole pool and over the kept prompts; and the upper bound on
    the solve rate of a prompt never solved in its n samples (``scipy.stats.beta.ppf(0.95, 1, n)``, the
    Clopper–Pearson bound 1 − 0.05^(1/n)), at the smallest n among the pruned prompts (``None`` when n is
    unknown). Keys: ``prune_never_solved``, ``prune_always_solved``, ``kept_prompts``, ``kept_share``,
    ``median_p``, ``G_star``, ``group_size``, ``silent_whole_pool``, ``silent_kept``, ``pruned_at_n``,
    ``pruned_p_bound``, ``epsilon``, ``kept_ids_available``. ``pool`` is the reader's
    :class:`~stddial_book.corpora.reader_pool.ReaderPool`; ``epsilon`` in (0, 1) is the group-size law's
    tolerance (fidelity 1 − ε)."""
    from scipy.stats import beta

    p = pool.solve_rates
    never, always = p == 0.0, p == 1.0
    kept = ~(never | always)
    out: dict[str, Any] = {
        "prune_never_solved": int(never.sum()),
        "prune_always_solved": int(always.sum()),
        "kept_prompts": int(kept.sum()),
        "kept_share": float(kept.mean()),
        "epsilon": float(epsilon),
        "median_p": None,
        "G_star": None,
        "group_size": None,
        "silent_whole_pool": None,
        "silent_kept": None,
        "pruned_at_n": None,
        "pruned_p_bound": None,
        "kept_ids_available": pool.prompt_ids is not None,
    }
    if kept.any():
        median = float(np.median(p[kept]))
        g_star = float(group_size_law(epsilon, median))
        out.update(median_p=median, G_star=g_star)
        if math.isfinite(g_star) and g_star <= _LARGEST_ADVISED_G:
            size = max(2, math.ceil(g_star))
            out.update(
                group_size=size,
                silent_whole_pool=float(np.mean(silent_probability(p, size))),
                silent_kept=float(np.mean(silent_probability(p[kept], size))),
            )
    pruned = never | always
    if pool.num_samples is not None and pruned.any():
        n = int(pool.num_samples[pruned].min())
        out.update(pruned_at_n=n, pruned_p_bound=float(beta.ppf(PRUNE_CONFIDENCE, 1, n)))
    return out


def recommendation_lines(rec: dict[str, Any], total: int) -> list[str]:
    """:func:`recommendation` as the report's closing lines (``rec``: its dict; ``total``: the pool's prompts)."""
    pruned = rec["prune_never_solved"] + rec["prune_always_solved"]
    lines = ["", "recommendation"]
    if rec["kept_prompts"] == 0:
        return lines + [
            "  every prompt is never or always solved: nothing here trains at any G; measure with more samples "
            "per prompt, or add prompts of middling difficulty"
        ]
    ids = "--kept-ids FILE writes their ids" if rec["kept_ids_available"] else "name the prompt column (--prompt COL)"
    ids += "" if rec["kept_ids_available"] else " to write their ids with --kept-ids FILE"
    if pruned:
        lines.append(
            f"  prune {pruned:,} of {total:,} prompts ({100 * pruned / total:.1f}%): {rec['prune_never_solved']:,} "
            f"never solved and {rec['prune_always_solved']:,} always solved in their samples; keep "
            f"{rec['kept_prompts']:,} ({ids})"
        )
    else:
        lines.append(f"  prune nothing: every prompt has 0 < p < 1 ({ids})")
    if rec["group_size"] is None:
        lines.append(
            f"  the group-size law asks for G* = {rec['G_star']:.3g} at the kept prompts' median p = "
            f"{rec['median_p']:.3g}: too large to train; prefer prompts nearer p = 0.5"
        )
    else:
        lines += [
            f"  G = {rec['group_size']} for the kept prompts: the group-size law's G* = {rec['G_star']:.1f} at their "
            f"median p = {rec['median_p']:.3f} (eps = {rec['epsilon']:g})",
            f"  silent groups at G = {rec['group_size']}: {100 * rec['silent_kept']:.1f}% after pruning "
            f"({100 * rec['silent_whole_pool']:.1f}% over the whole pool)",
        ]
    if rec["pruned_p_bound"] is not None:
        lines.append(
            f"  caveat: a prompt never solved in n = {rec['pruned_at_n']} samples may still have p up to "
            f"{rec['pruned_p_bound']:.2f} ({PRUNE_CONFIDENCE:.0%} bound), and one always solved may fail as often: "
            "a pruned prompt may be learnable. Re-measure the pruned prompts with more samples, or return them to "
            "the pool as the model changes."
        )
    elif pruned:
        lines.append(
            "  caveat: n is unknown, so how sure p = 0 or p = 1 is cannot be said: a pruned prompt may be learnable."
        )
    return lines


def kept_ids(pool: ReaderPool) -> list:
    """The ids of the prompts :func:`recommendation` keeps (0 < p < 1), in the table's order.

    ``pool`` is the reader's :class:`~stddial_book.corpora.reader_pool.ReaderPool`; it must have a prompt column
    (else ``ValueError``)."""
    if pool.prompt_ids is None:
        raise ValueError(
            f"{printable(pool.name)} has no column naming its prompts, so there are no ids to write; name it with "
            "--prompt COL, or leave --kept-ids out."
        )
    keep = (pool.solve_rates > 0.0) & (pool.solve_rates < 1.0)
    return [value for value, kept in zip(pool.prompt_ids, keep.tolist()) if kept]


def check_new_file(path: str | os.PathLike, flag: str = "--kept-ids") -> Path:
    """``path`` expanded, if a new file may be created there: nothing (not even a link) by that name yet,
    and its folder exists; else a one-line ``ValueError`` (checked before anything is written). ``flag`` is
    the command-line option the error messages name (default ``"--kept-ids"``)."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise ValueError(f"{flag} must name a new file, e.g. {flag} kept_ids.jsonl; got {printable(repr(path))[:60]}.")
    target = expand_path(text)
    if target.exists() or target.is_symlink():
        raise ValueError(
            f"{flag} {printable(text)} already exists; nothing was changed: name a new file (it is never replaced)."
        )
    if not target.parent.is_dir():
        raise ValueError(
            f"{flag} {printable(text)}: the folder {printable(str(target.parent))} does not exist; create it first."
        )
    return target


def write_kept_ids(pool: ReaderPool, path: str | os.PathLike) -> Path:
    """Write :func:`kept_ids` into the new file ``path`` (:func:`check_new_file`), one JSON value a line (a
    number, a string, or a conversational prompt's list of messages, as the table held it); read it back
    with ``[json.loads(line) for line in open(path)]``. Never replaces a file (``O_EXCL``) or follows a link.
    ``pool`` is the reader's :class:`~stddial_book.corpora.reader_pool.ReaderPool` (with a prompt column); returns the
    file's path."""
    target = check_new_file(path)
    ids = kept_ids(pool)
    body = "".join(json.dumps(value, ensure_ascii=False) + "\n" for value in ids)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(target, flags, 0o644), "w", encoding="utf-8") as handle:
        handle.write(body)
    return target
