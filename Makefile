# The workbook's commands. `make run` and `make test` set up what is missing first.
#
#   make run        execute every notebook headless (papermill) into results/<device>/
#   make test       the whole test suite: CPU tests, kernel compilation, notebooks under nbval
#   make lab        JupyterLab on the checkout, opened at notebooks/ (results/ holds the executed copies, read-only)
#   make test-gpu   only the tests that need a GPU
#   make sanitize   compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over every kernel and solution
#   make bench      measure the device's ceilings and record them under results/<device>/
#   make profile    Nsight Compute on rung 7 and problem 94's whole-model kernel, recorded under results/<device>/
#   make ladder     verify every GEMM rung against cuBLAS, time them side by side, record the ladder
#   make sweep      every drop-in, its GEMM and cuBLAS against eager and torch.compile over the batch M = 1..16384
#   make clean      remove kernel builds and executed-notebook scratch (keeps .venv and results/)
#
# Variables:
#   PY=python3      use an interpreter that already has the dependencies (skips the venv setup); the
#                   default is the venv's, or `python` inside the active conda environment of environment.yml
#   TORCH=...       the torch requirement installed into the venv (default: the pin in torch-requirement.txt)
#   NOTEBOOKS="00 01"  which notebooks `make run` executes (default: all)
#   LAB_ARGS="--port 8899 --ip 0.0.0.0 --no-browser"  more arguments for `jupyter lab` (a remote GPU machine)
#   TEST_WORKERS=1  `make test` in one process (default: one worker per core, at most 4)

PYTHON   ?= python3
VENV     ?= .venv
CONDA_ENV := fused-kernels-workbook
# environment.yml's environment, activated, has every dependency: use its python, make no venv
PY       ?= $(if $(filter $(CONDA_ENV),$(CONDA_DEFAULT_ENV)),python,$(VENV)/bin/python)
TORCH_PIN := torch-requirement.txt
TORCH    ?= $(strip $(shell grep -m1 '^torch' $(TORCH_PIN)))
NOTEBOOKS ?=
LAB_ARGS ?=
# `make test` lists its 25 slowest steps at the end (--durations: a cold build shows in the test that waited for it).
# Its workers (pytest-xdist): each takes whole test modules and whole notebooks (--dist loadscope, so
# a notebook's cells run in order in one kernel), in the order tests/conftest.py gives them (not xdist's, which
# would start with the modules of most tests); one per core, at most 4 (a GPU machine shares one GPU).
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))")
STAMP    := $(VENV)/.installed
TORCH_STAMP := $(VENV)/.torch-installed

# Set up the venv only when PY is the venv's interpreter.
SETUP := $(if $(filter $(VENV)/%,$(PY)),$(STAMP),)

.PHONY: setup run test lab test-gpu sanitize bench profile ladder sweep clean

setup: $(SETUP)

$(TORCH_STAMP): $(TORCH_PIN)
	@echo "== setting up $(VENV) (first time: about a minute, torch is large)"
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet "$(TORCH)" ninja
	@touch $@

$(STAMP): pyproject.toml $(TORCH_STAMP)
	$(EARLY_PREBUILD)
	$(VENV)/bin/python -m pip install --quiet -e ".[lab,test]"
	$(VENV)/bin/python -m ipykernel install --sys-prefix --name python3 --env PYTHONPATH "$(CURDIR)" >/dev/null
	@$(NBSTRIPOUT)
	@touch $@

# `make test` from nothing: while pip installs the notebooks' and the tests' packages (most of a minute, the cores
# mostly idle), the kernel files start building in the background, one at a time: torch and ninja are in, which is
# all a build needs. The test session finds each kernel built, or waits for the build that holds its lock.
EARLY_PREBUILD = $(if $(filter test,$(MAKECMDGOALS)),mkdir -p build && { $(VENV)/bin/python -m utils.build --jobs 1 \
	> build/setup_prebuild.log 2>&1 & },)

# notebooks/ are committed without outputs: nbstripout, as the git filter .gitattributes names, shows git the
# notebook without outputs and without the kernel's Python version (cell ids kept), whatever a reader ran.
# It is configured in this checkout's .git/config; outside a git checkout there is nothing to configure.
NBSTRIPOUT = if git rev-parse --git-dir >/dev/null 2>&1; then \
	  $(PY) -m nbstripout --install --attributes .gitattributes && \
	  git config filter.nbstripout.clean "\"$$($(PY) -c 'import sys; print(sys.executable)')\" -m nbstripout --keep-id" && \
	  git config filter.nbstripout.extrakeys metadata.language_info.version; fi

run: $(SETUP)
	$(PY) -m utils.run $(if $(NOTEBOOKS),--notebooks $(NOTEBOOKS),)

test: $(SETUP)
	$(PY) -m utils.env --brief
	PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) -m pytest tests notebooks --nbval-lax --nbval-cell-timeout=1800 -p no:cacheprovider \
	    -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=25

test-gpu: $(SETUP)
	$(PY) -m pytest tests -m gpu -p no:cacheprovider

sanitize: $(SETUP)
	$(PY) -m utils.sanitize

bench: $(SETUP)
	$(PY) -m utils.bench --ceilings

profile: $(SETUP)
	$(PY) -m utils.profile

ladder: $(SETUP)
	$(PY) -m utils.ladder

sweep: $(SETUP)
	PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) -m utils.chapters.batch_sweep

# Lab serves the whole checkout (results/ holds the executed copies) and opens on notebooks/;
# jupyter_server_config.py keeps results/ read-only and notebooks/' metadata stable, so that opening
# and leaving any notebook leaves `git status` clean (tests/test_lab_browser.py checks it in Chromium).
# Jupyter refuses to start as root without --allow-root, which Docker GPU runners need.
lab: $(SETUP)
	@$(NBSTRIPOUT)
	PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) -m jupyter lab \
	    --config="$(CURDIR)/jupyter_server_config.py" \
	    --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks \
	    $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

clean:
	rm -rf build .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
