# Two entry points: `make run` (the main job on the embedded default) and `make test`.
# Both create .venv and install what they need on a fresh Debian 12 machine (as root).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean system-deps

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# Rendering needs EGL (headless OpenGL), the browser test Debian's chromium; installed only if missing.
system-deps:
	@if ! command -v chromium >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi
	@if ! ldconfig -p | grep -q libEGL_mesa.so.0 || ! ldconfig -p | grep -q libOpenGL.so.0; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri libopengl0 >/dev/null; \
	fi

run: system-deps $(STAMP)
	MUJOCO_GL=egl $(BIN)/worldsample run

# two xdist workers, a file per worker at a time (its module fixtures built once), in collection order:
# tests/conftest.py puts the long whole-job files first. More workers on 2 cores starve the real-time DDS tests.
test: system-deps $(STAMP)
	MUJOCO_GL=egl $(BIN)/python -m pytest -q --durations=15 -n 2 --dist loadfile --no-loadscope-reorder

# benchmarks: the bench extra (matplotlib for plots), then the store benchmark; see README for the others
bench: system-deps $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	MUJOCO_GL=egl $(BIN)/python bench/store.py

clean:
	rm -rf $(VENV) runs .pytest_cache
