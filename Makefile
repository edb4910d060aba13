# voxeval: `make demo` sets everything up and runs the demo; `make test` installs and tests.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= runs

.PHONY: setup demo test check lint format typecheck bench clean system-deps

# System packages (espeak-ng voices, fluidsynth + GM soundfont for music beds, Chromium for the
# rating app's browser test). Optional:
# voxeval degrades without them; installed when we are root and apt-get exists.
system-deps:
	@if ! command -v espeak-ng >/dev/null || ! command -v fluidsynth >/dev/null || [ ! -f /usr/share/sounds/sf2/FluidR3_GM.sf2 ] || ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    echo "installing espeak-ng fluidsynth fluid-soundfont-gm chromium (apt)"; \
	    (apt-get update -qq || true) >/dev/null 2>&1; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq espeak-ng fluidsynth fluid-soundfont-gm chromium >/dev/null 2>&1 \
	      || echo "warning: apt-get install failed; demo uses piper voices and the built-in music synth, the browser test skips"; \
	  else echo "note: espeak-ng/fluidsynth/chromium missing and not root; demo uses fallbacks, the browser test skips"; fi; \
	fi

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned to the local CPU wheel, so the `speaker` extra's range installs nothing more
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[all,speaker,dev]'
	# resemblyzer pulls the old `webrtcvad`, whose module imports pkg_resources (gone from new
	# setuptools); the maintained wheel provides the same module
	$(BIN)/python -m pip install -q --force-reinstall --no-deps webrtcvad-wheels
	touch $(STAMP)

setup: system-deps $(STAMP)

demo: setup
	$(BIN)/voxeval demo --out $(OUT)

test: setup
	$(BIN)/python -m pytest -q

check: setup lint typecheck test

lint:
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format:
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

typecheck:
	$(BIN)/mypy src/voxeval

bench: setup
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(OUT) .mypy_cache .ruff_cache .pytest_cache
