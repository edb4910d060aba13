# voxassay: `make demo` sets everything up and runs the demo; `make test` installs and tests.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# examples/pipecat_desk runs in its own environment (Pipecat pins older soundfile/soxr/protobuf)
PIPECAT_VENV ?= .venv-pipecat
PIPECAT_STAMP := $(PIPECAT_VENV)/.installed
OUT ?= runs
# The inner-loop tier: no real models, no real processes or sockets, no browser, no Ray.
FAST := not slow and not live and not browser and not ray

.PHONY: print-system-deps ci-fresh pipecat-env setup setup-dev demo test test-fast coverage check lint format typecheck bench bench-feedback clean system-deps system-deps-test

# Each install stage and the test run go through .ci/timed, which prints its time (and logs it
# for `make ci-fresh` when VOXASSAY_STAGE_LOG is set).
TIMED := bash .ci/timed
COMMA := ,
# Debian packages the demo uses (espeak-ng voices, fluidsynth + GM soundfont for music beds);
# voxassay degrades without them.
SYSTEM_DEPS := espeak-ng fluidsynth fluid-soundfont-gm
# What only the tests need: Chromium for the rating app's browser test, coturn for the
# relay-route sessions, PulseAudio for the sound loop (under CI=true a missing coturn or
# PulseAudio fails its test).
SYSTEM_DEPS_TEST := chromium coturn pulseaudio pulseaudio-utils

system-deps:
	@$(TIMED) apt bash .ci/apt-install "the demo uses piper voices and the built-in music synth" $(SYSTEM_DEPS)

system-deps-test: system-deps
	@$(TIMED) apt bash .ci/apt-install "the browser, TURN relay and sound loop tests skip" $(SYSTEM_DEPS_TEST)

print-system-deps:
	@echo $(SYSTEM_DEPS) $(SYSTEM_DEPS_TEST)

# Bytecode for everything a venv holds (its site-packages and this checkout's src), compiled
# once on both cores: pip runs with --no-compile (it compiles one file at a time), and where
# PYTHONDONTWRITEBYTECODE=1 (CI, many containers) nothing else ever writes a .pyc, so every
# process would compile all it imports from source (3x the start-up of a CLI process, 3-8x
# for torch). Files that do not compile on this Python (a few third-party tests) are skipped.
define bytecode
	@$(TIMED) bytecode bash -c '$(1)/bin/python -m compileall -qq -j 0 \
	  "$$($(1)/bin/python -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")" src >/dev/null || true'
endef

$(VENV)/bin/python:
	@$(TIMED) venv $(PY) -m venv $(VENV)

# The runtime environment with the given extras, in one pip resolution; $(2) is the stamp.
define install_venv
	@$(TIMED) pip $(BIN)/python -m pip install -q --no-compile --upgrade pip
	# torch first, pinned to the local CPU wheel, so the `speaker` extra's range installs nothing more
	@$(TIMED) pip $(BIN)/python -m pip install -q --no-compile torch==2.13.0
	@$(TIMED) pip $(BIN)/python -m pip install -q --no-compile -e '.[$(1)]'
	# resemblyzer pulls the old `webrtcvad`, whose module imports pkg_resources (gone from new
	# setuptools); the maintained wheel provides the same module
	@$(TIMED) pip $(BIN)/python -m pip install -q --no-compile --force-reinstall --no-deps webrtcvad-wheels
	$(call bytecode,$(VENV))
	# librosa's numba kernels compiled once, before parallel processes race to write their cache
	@$(TIMED) numba $(BIN)/python -m voxassay.measures.numba_cache
	touch $(2)
endef

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(call install_venv,all$(COMMA)speaker,$(STAMP))

# The test and lint tools on top of the runtime (the `dev` extra) and Ray for the scale-out
# tests, installed with the runtime in one resolution (a fresh clone's `make test` runs pip
# and the bytecode stage once, not twice).
$(DEV_STAMP): pyproject.toml | $(VENV)/bin/python
	$(call install_venv,all$(COMMA)speaker$(COMMA)ray$(COMMA)dev,$(DEV_STAMP))
	touch $(STAMP)

$(PIPECAT_STAMP): examples/pipecat_desk/requirements.txt pyproject.toml
	test -x $(PIPECAT_VENV)/bin/python || $(TIMED) venv $(PY) -m venv $(PIPECAT_VENV)
	@$(TIMED) pip $(PIPECAT_VENV)/bin/python -m pip install -q --no-compile -r examples/pipecat_desk/requirements.txt -e '.[faster-whisper,piper]'
	$(call bytecode,$(PIPECAT_VENV))
	touch $(PIPECAT_STAMP)

pipecat-env: $(PIPECAT_STAMP)

setup: system-deps $(STAMP)

# the two environments install side by side (about 45 s saved on a fresh checkout)
setup-dev: system-deps-test
	@$(MAKE) --no-print-directory -j2 $(DEV_STAMP) $(PIPECAT_STAMP)

demo: setup
	$(BIN)/voxassay demo --out $(OUT)

# Every tier, on both cores: pytest-xdist workers each take whole modules (and the groups of
# modules that share a session-wide run), longest first (xdist would otherwise reorder the
# groups by their number of tests, which starts the long few-test groups last). A worker that
# crashes (a segfault in native code) fails the run at once: with restarts, xdist re-sends the
# crashed group and has been seen to wait forever for it.
XDIST := -n 2 --dist loadgroup --no-loadscope-reorder --max-worker-restart=0
# src and tests are compiled again before each run (only files changed since are): a checkout
# edited after the install would otherwise compile its changed modules in every process.
test: setup-dev
	@$(BIN)/python -m compileall -qq -j 0 src tests >/dev/null || true
	@$(TIMED) pytest $(BIN)/python -m pytest -q $(XDIST)

test-fast: setup-dev
	@$(BIN)/python -m compileall -qq -j 0 src tests >/dev/null || true
	$(BIN)/python -m pytest -q $(XDIST) -m "$(FAST)"

# CI on this machine: a fresh clone of HEAD in a temporary folder runs .ci/run with
# PYTHONDONTWRITEBYTECODE=1 and an empty pip cache; prints each stage's time (.ci/fresh).
ci-fresh:
	@bash .ci/fresh

# Branch coverage of src/voxassay over the whole suite (xdist workers and subprocesses included).
coverage: setup-dev
	rm -f .coverage .coverage.*
	$(BIN)/coverage run -m pytest -q $(XDIST)
	$(BIN)/coverage combine -q
	$(BIN)/coverage report --precision=2 | tail -1

check: setup-dev lint typecheck test

lint: setup-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format:
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

typecheck: setup-dev
	$(BIN)/mypy src/voxassay

bench: setup-dev
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Times `voxassay demo` and the test tiers and prints them beside the targets.
bench-feedback: setup-dev
	$(BIN)/python benchmarks/bench_feedback.py

clean:
	rm -rf $(VENV) $(PIPECAT_VENV) $(OUT) .mypy_cache .ruff_cache .pytest_cache .coverage .coverage.*
