"""The controlled run of Bernoulli-logit prompts (chapters 6 and 8; Bay and Yearick, 2026, §8): the run
itself and what chapter 8 measures on it."""
