"""Experiments: the book's studies, one subpackage each, named by the chapter subject it serves, and the
statistics they share.

* ``identity``: the identity, checked (chapters 2 to 4);
* ``controlled``: the controlled run of Bernoulli-logit prompts (chapters 6 and 8);
* ``testbed``: the language-model testbed's runs and what chapters 9 to 13 read from them;
* ``ablation``: chapter 13's dial-only ablation;
* ``smollm2``: chapter 15's recorded SmolLM2 runs;
* ``allocation``: Part V's allocation rules (chapter 16);
* ``diagnose``: a reader's prompt pool, diagnosed (``python -m stddial_book diagnose``);
* ``reproduction``: the source paper's numbered results beside the book's (the appendix);
* :mod:`stddial_book.experiments.statistics`: comparing recipes over seeds, shared by the studies;
* :mod:`stddial_book.experiments.edition`: what this edition was built with (the appendix).
"""
