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

.PHONY: pipecat-env setup setup-dev demo test test-fast coverage check lint format typecheck bench bench-feedback clean system-deps system-deps-test

# apt-get install of the named Debian packages when one is missing and we are root (else a note).
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    echo "installing$$missing (apt)"; \
	    (apt-get update -qq || true) >/dev/null 2>&1; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null 2>&1 \
	      || echo "warning: apt-get install$$missing failed; $(2)"; \
	  else echo "note:$$missing missing and not root; $(2)"; fi; \
	fi
endef

# System packages the demo uses (espeak-ng voices, fluidsynth + GM soundfont for music beds).
# Optional: voxassay degrades without them.
system-deps:
	$(call apt_install,espeak-ng fluidsynth fluid-soundfont-gm,the demo uses piper voices and the built-in music synth)

# What only the tests need: Chromium for the rating app's browser test, coturn for the
# relay-route sessions, PulseAudio for the sound loop (under CI=true a missing coturn or
# PulseAudio fails its test).
system-deps-test: system-deps
	$(call apt_install,chromium coturn pulseaudio pulseaudio-utils,the browser and TURN relay and sound loop tests skip)

# --no-compile: no .pyc for the whole of torch and the rest at install (about 40 s on a fresh
# checkout); Python compiles what is imported, once, on first import.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-compile --upgrade pip
	# torch first, pinned to the local CPU wheel, so the `speaker` extra's range installs nothing more
	$(BIN)/python -m pip install -q --no-compile torch==2.13.0
	$(BIN)/python -m pip install -q --no-compile -e '.[all,speaker]'
	# resemblyzer pulls the old `webrtcvad`, whose module imports pkg_resources (gone from new
	# setuptools); the maintained wheel provides the same module
	$(BIN)/python -m pip install -q --no-compile --force-reinstall --no-deps webrtcvad-wheels
	# librosa's numba kernels compiled once, before parallel processes race to write their cache
	$(BIN)/python -m voxassay.measures.numba_cache
	touch $(STAMP)

# The test and lint tools on top of the runtime (the `dev` extra), and Ray for the scale-out tests.
$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q --no-compile -e '.[all,speaker,ray,dev]'
	touch $(DEV_STAMP)

$(PIPECAT_STAMP): examples/pipecat_desk/requirements.txt pyproject.toml
	test -x $(PIPECAT_VENV)/bin/python || $(PY) -m venv $(PIPECAT_VENV)
	$(PIPECAT_VENV)/bin/python -m pip install -q --no-compile -r examples/pipecat_desk/requirements.txt -e '.[faster-whisper,piper]'
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
test: setup-dev
	$(BIN)/python -m pytest -q $(XDIST)

test-fast: setup-dev
	$(BIN)/python -m pytest -q $(XDIST) -m "$(FAST)"

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
