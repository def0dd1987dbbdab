# The README's commands. `make demo` and `make test` each set up everything they need.
VENV ?= .venv
PY := $(VENV)/bin/python
INDEX_DIR ?= indexes

.PHONY: setup setup-test setup-bench setup-gpu demo test test-slow test-ray test-gpu fuzz lint bench clean \
	gpu-carry bench-gpu bench-gpu-smoke gpu-results bench-list bench-smoke bench-table

# Three steps, each with its stamp: `make demo` installs what semsearch runs on (with the
# CPU encoder runtime); the tests add their tools (pytest, sentence-transformers as the
# reference, moto, Playwright) and gensim, which they train word vectors with; the
# benchmarks add theirs (psutil, txtai as the server's peer) on top of those.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch first, so nothing pulls in several GB of CUDA packages.
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[cpu-runtime]"
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[cpu-runtime,test,baselines]"
	touch $@

$(VENV)/.bench-installed: $(VENV)/.test-installed
	$(PY) -m pip install -q -e ".[cpu-runtime,test,baselines,bench]"
	touch $@

setup: $(VENV)/.installed
setup-test: $(VENV)/.test-installed
setup-bench: $(VENV)/.bench-installed

demo: setup
	$(VENV)/bin/semsearch build data/demo/debian_packages.parquet --name debian-demo \
		--id-column package --out-dir $(INDEX_DIR) --overwrite
	$(VENV)/bin/semsearch query "edit photos and images" --index debian-demo --index-dir $(INDEX_DIR) -k 5
	$(VENV)/bin/semsearch query "play a strategy game" --index debian-demo --index-dir $(INDEX_DIR) -k 5
	$(VENV)/bin/semsearch query "encrypt my backups" --index debian-demo --index-dir $(INDEX_DIR) -k 5
	@echo "semsearch is installed in $(VENV): '. $(VENV)/bin/activate' puts it on your PATH"

# The quick suite (about 6 min on 2 quiet cores, 7-9 min busy); the slow tests run on the real model.
test: setup-test
	$(VENV)/bin/python -m pytest -q -m "not slow"

test-slow: setup-test
	$(VENV)/bin/python -m pytest -q -m "slow and not ray"

# `--engine ray` on a local Ray instance and a simulated two-node cluster, and an S3 corpus on a
# local moto server (about six minutes on 2 cores); installs the `ray` extra first.
$(VENV)/.ray-installed: $(VENV)/.test-installed
	$(PY) -m pip install -q -e ".[ray]"
	touch $@

test-ray: $(VENV)/.ray-installed
	$(VENV)/bin/python -m pytest -q -m ray

# On a CUDA machine: torch from PyPI (its Linux wheel is the CUDA build) and GPU FAISS in
# place of faiss-cpu. Both install the same `faiss` module, so faiss-cpu is removed first and
# faiss-gpu reinstalled over what it left. `make test-gpu` runs the tests marked `gpu`.
GPU_VENV ?= .venv-gpu
$(GPU_VENV)/.installed: pyproject.toml
	python3 -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/python -m pip install -q --upgrade pip
	$(GPU_VENV)/bin/python -m pip install -q "torch==2.13.0"
	$(GPU_VENV)/bin/python -m pip install -q -e ".[test,gpu]"
	$(GPU_VENV)/bin/python -m pip uninstall -q -y faiss-cpu
	$(GPU_VENV)/bin/python -m pip install -q --force-reinstall --no-deps "faiss-gpu-cu12>=1.14,<2"
	touch $@

setup-gpu: $(GPU_VENV)/.installed

test-gpu: setup-gpu
	$(GPU_VENV)/bin/python -m pytest -q -m gpu -rs

# The benchmarks as a suite (benchmarks/suite.py): `make bench-list` prints each one, what it
# measures and its goals; `make bench-smoke` runs every registered CPU script at tiny sizes into
# /tmp/bench_smoke (nothing recorded), each under its time limit, pass or fail per script;
# `make bench-table` rewrites the goals table and latest figures of benchmarks/RESULTS.md from
# benchmarks/results/*.jsonl.
bench-list:
	python3 benchmarks/suite.py list

bench-smoke: setup-bench
	$(PY) benchmarks/suite.py smoke --scratch /tmp/bench_smoke

bench-table:
	python3 benchmarks/suite.py table --write

# The GPU suite (benchmarks/gpu_suite.sh). Here: `make gpu-carry` packs `.gpu/bundle`, carried
# by the device call, prints the call's MiB with the tracked files and fails over 60 MiB (of its
# 64); on the lent GPU machine, one call of at most 8 minutes:
# `make bench-gpu` (nothing is installed there: the bundle brings the model, data and FAISS),
# or `make bench-gpu STEP=build` to rerun one step (checks, encode, build, mine, pairs, tests);
# here again after it: `make gpu-results FROM=<the call's files folder> [LABEL=build]`.
# `make bench-gpu-smoke` runs every step on this CPU at small sizes (about 4 minutes).
STEP ?= all
LABEL ?= suite
gpu-carry: setup-bench
	$(PY) benchmarks/gpu_carry.py --bundle

bench-gpu:
	bash benchmarks/gpu_suite.sh $(STEP)

bench-gpu-smoke: setup-bench
	rm -rf /tmp/gpu_suite_smoke
	SMOKE=1 PY=$(abspath $(PY)) WORK=/tmp/gpu_suite_smoke/work OUT=/tmp/gpu_suite_smoke \
		bash benchmarks/gpu_suite.sh all

gpu-results: setup-bench
	$(PY) benchmarks/gpu_collect.py $(FROM) --label $(LABEL)

# A long random run of the corpus fuzz test (tests/cli/test_fuzz.py): FUZZ_EXAMPLES corpora
# through build and query; `make test` runs 40 fixed ones, `make test-slow` 300 more.
FUZZ_EXAMPLES ?= 2000
fuzz: setup-test
	SEMSEARCH_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
		tests/cli/test_fuzz.py --hypothesis-show-statistics

lint: setup-test
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check semsearch tests benchmarks
	$(VENV)/bin/ruff format --check semsearch tests benchmarks

clean:
	rm -rf $(INDEX_DIR) .pytest_cache
