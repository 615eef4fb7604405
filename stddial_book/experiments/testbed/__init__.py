"""The language-model testbed's runs (chapters 9 to 13): SFT and RL into directories and cached, the
recorded reference runs, reading their logs, the paper's predictions on them, probes, DAPO's refill, and
chapter 13's comparison of the recipes."""
