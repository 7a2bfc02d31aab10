# `make demo` and `make test` work from a fresh clone: they create .venv, install evalkit, and (for the
# browser tests) Debian's chromium when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser)

.PHONY: demo test lint venv chromium pyc sample-run clean-venv notebook-filter lab-hook

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all,dev]"
	touch $(STAMP)

venv: $(STAMP) notebook-filter lab-hook

# Running the shipped notebooks saves their outputs into them; git's clean filter (.gitattributes) keeps
# those out of `git status` and of commits. Outside a git checkout there is nothing to set up.
notebook-filter:
	@git rev-parse --git-dir >/dev/null 2>&1 && \
		git config filter.evalkit-notebook.clean "python3 notebooks/strip_outputs.py" || true

# JupyterLab from this venv saves the shipped notebooks without outputs, as git's filter commits them
# (evalkit/analysis/lab.py), so that `git status` stays clean after running them.
lab-hook: $(STAMP)
	@$(BIN)/python -m evalkit.analysis.lab

# An editable install leaves evalkit's modules as source; where PYTHONDONTWRITEBYTECODE is set (as it is on
# some CI machines) every process would compile them again as it starts (~0.1 s before the demo's first
# episode, and again in each env process). Files already compiled are skipped.
pyc: $(STAMP)
	$(BIN)/python -m compileall -q evalkit viewer >/dev/null

chromium:
	@if [ -z "$(CHROMIUM)" ]; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium is missing: install Debian's chromium (sudo apt-get install chromium)"; fi; \
	fi

# JupyterLab for the notebooks (`jupyter lab notebooks/`): the demo installs it, the tests do not need it.
LAB_STAMP := $(VENV)/.lab-installed
$(LAB_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[lab]"
	touch $(LAB_STAMP)

demo: $(STAMP) $(LAB_STAMP) pyc notebook-filter lab-hook
	$(BIN)/evalkit run --env canvas --models baseline:tracer,baseline:random \
		--evalset data/evalsets/canvas-test-300.json --subset lite --concurrency 8 --out runs/demo
	$(BIN)/evalkit summarise runs/demo
	@echo "notebooks: $(BIN)/jupyter lab notebooks/   (or: source $(BIN)/activate)"

test: $(STAMP) chromium pyc notebook-filter lab-hook
	$(BIN)/python -m pytest -q -p no:cacheprovider

# The small committed run the viewer tests and the README point at; regenerate after a trace-format change.
# The model in it is the stand-in (evalkit/providers/standin.py): the Anthropic wire served locally, no key needed.
# One episode at a time, so that the stand-in's mistakes land on the same episodes every time.
sample-run: $(STAMP)
	rm -rf data/sample-run
	$(BIN)/python -m evalkit.providers.standin -- $(BIN)/evalkit run --env canvas \
		--models baseline:tracer,baseline:random,anthropic:evalkit-standin@low \
		--evalset data/evalsets/canvas-test-300.json --subset core30 --limit 6 \
		--modes reference,description --max-turns 12 --concurrency 1 --no-progress --out data/sample-run
	rm -rf data/sample-run/.evalkit

lint: $(STAMP)
	$(BIN)/ruff check evalkit tests viewer benchmarks

clean-venv:
	rm -rf $(VENV)
