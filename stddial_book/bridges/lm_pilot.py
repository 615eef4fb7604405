"""The learning-rate pilot of the recorded SmolLM2 runs (chapter 15): its rule lives with the study
(:mod:`stddial_book.experiments.lm_study`), named here for the recording tool."""

from __future__ import annotations

from stddial_book.experiments.lm_study import PILOT_LAST_STEPS, PILOT_TIE, choose_learning_rate, pass_rate_curve

__all__ = ["PILOT_LAST_STEPS", "PILOT_TIE", "choose_learning_rate", "pass_rate_curve"]
