# ORT Workbench. `make demo` and `make test` each set up everything they need first.
PY := .venv/bin/python
RUNS ?= runs
PORT ?= 8888
PYTEST_ARGS ?=

.PHONY: setup setup-test setup-web setup-gpu setup-gpu-infer bench-gpu demo lab workshop test test-parallel test-fast bench bench-all doctor clean

setup:
	bash scripts/setup.sh

setup-test:
	bash scripts/setup.sh --test

## onnxruntime-web 1.19.2 (web/package-lock.json) for `workbench ondevice`'s web page: node and npm from
## Debian when missing, then npm ci --ignore-scripts in web/ (make setup-test does this too).
setup-web:
	bash scripts/setup.sh --web

setup-gpu:
	bash scripts/setup.sh --gpu

## Inference on a GPU without ORTModule: onnxruntime-gpu in .venv-gpu-infer (its own lock,
## requirements/constraints-gpu-infer.txt). Offline GPU machine: WHEELHOUSE=DIR (scripts/setup_gpu_infer.sh --download DIR).
setup-gpu-infer:
	bash scripts/setup_gpu_infer.sh

## The GPU benchmark (issue-10 table) in the inference GPU environment; on a machine without CUDA it says so.
bench-gpu: setup-gpu-infer
	.venv-gpu-infer/bin/python benchmarks/bench_gpu.py --out $(RUNS)/bench/bench_gpu.json

doctor: setup
	$(PY) -m workbench.cli doctor

## The main job: the headless walkthrough on the built-in model and data, into a run folder.
demo: setup
	$(PY) -m workbench.cli demo --runs $(RUNS)

## JupyterLab on 127.0.0.1 with the notebooks.
lab: setup
	$(PY) -m jupyter lab --ip=127.0.0.1 --no-browser --port=$(PORT) --notebook-dir=notebooks

## Before a workshop, once per laptop: set up, then fine-tune the notebooks' MiniLM and cache it
## (~/.cache/ort-workbench or $ORT_WORKBENCH_HOME). Nothing is downloaded afterwards.
workshop: setup
	$(PY) -m workbench.cli workshop

## Every test: core, plots, widgets, notebooks, and the real-browser tests, in a random order
## (pytest-randomly: the seed is printed; PYTEST_ARGS=--randomly-seed=N repeats it).
test: setup-test
	$(PY) -m pytest -q -ra -p randomly --durations=25 $(PYTEST_ARGS)

## Every test on two workers (pytest-xdist): 15 min 21 s instead of 19 min 15 s on this 2-core machine, but
## each worker's load is the other's busy machine: speed verdicts measured meanwhile say so ("unmeasured").
test-parallel: setup-test
	$(PY) -m pytest -q -ra -p randomly -n 2 --durations=25 $(PYTEST_ARGS)

## Everything but the tests marked slow (the real MiniLM, long runs), heavy (over 60 s: the notebooks with
## their committed defaults, the benchmark run) and ui (JupyterLab in Chromium); it says how many it left out.
test-fast: setup-test
	@echo "test-fast: leaves out the tests marked slow (the real MiniLM, long runs), heavy (over 60 s) and ui (JupyterLab in Chromium): pytest's last line counts them as deselected; make test runs everything"
	$(PY) -m pytest -q -ra -p randomly -m "not slow and not heavy and not ui" --durations=10 $(PYTEST_ARGS)

## Every inference variant (PyTorch and ONNX Runtime, FP32 and INT8) and the training step, side by
## side in one process, with the machine and the floor (benchmarks/bench.py; BENCH_ARGS=--quick).
bench: setup
	$(PY) benchmarks/bench.py --out $(RUNS)/bench/bench.json $(BENCH_ARGS)

## The detailed benchmarks too (training knobs, graph variants, quantization search), one process each.
bench-all: setup
	$(PY) benchmarks/run_all.py --out $(RUNS)/bench

clean:
	rm -rf .venv .pytest_cache test-output
