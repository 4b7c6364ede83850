# ORT Workbench. `make demo` and `make test` each set up everything they need first.
PY := .venv/bin/python
RUNS ?= runs
PORT ?= 8888
PYTEST_ARGS ?=

.PHONY: setup setup-test wheelhouse setup-web setup-gpu setup-gpu-infer setup-current setup-openvino bench-gpu demo lab workshop test test-room test-current test-current-quick test-fast bench bench-all bench-stacks classifier-result doctor docs lint screenshots clean

setup:
	bash scripts/setup.sh

setup-test:
	bash scripts/setup.sh --test

## Every wheel `make setup` installs (the lock's pins, CPython 3.11, Linux x86_64) in one folder with manifest.json,
## checked to resolve with no index: a room with poor internet then runs WHEELHOUSE=DIR make setup (docs/workshop.md).
## WHEELHOUSE=DIR (default wheelhouse/); WHEELHOUSE_ARGS passes more (--python 3.12, --extras cpu,test,docs,scale, --check).
WHEELHOUSE_PY ?= $(shell command -v python3.11 || command -v python3)
wheelhouse:
	$(WHEELHOUSE_PY) scripts/wheelhouse.py --out $(or $(WHEELHOUSE),wheelhouse) $(WHEELHOUSE_ARGS)

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

## The GPU benchmark (the H100 table of docs/benchmarks/index.md) in the inference GPU environment; on a machine without CUDA it says so.
bench-gpu: setup-gpu-infer
	.venv-gpu-infer/bin/python benchmarks/bench_gpu.py --out $(RUNS)/bench/bench_gpu.json

doctor: setup
	$(PY) -m workbench.cli doctor

## The main job: the headless walkthrough on the built-in model and data, into a run folder.
demo: setup
	$(PY) -m workbench.cli demo --runs $(RUNS)

## JupyterLab on 127.0.0.1, opened at notebooks/ (it serves the repository: the notebooks show their pictures from docs/img).
lab: setup
	$(PY) -m jupyter lab --ip=127.0.0.1 --no-browser --port=$(PORT) --notebook-dir=. --LabApp.default_url=/lab/tree/notebooks

## Before a workshop, once per laptop: set up, then fine-tune the notebooks' MiniLM and cache it
## (~/.cache/ort-workbench or $WORKBENCH_HOME). Nothing is downloaded afterwards.
workshop: setup
	$(PY) -m workbench.cli workshop

## The current stack (transformers 5, torch 2.13, onnxruntime 1.32, sentence-transformers 6) in .venv-current,
## from requirements/constraints-current.txt: everything but ORTModule training and on-device training artifacts.
setup-current:
	bash scripts/setup_current.sh

## The embedding benchmark's OpenVINO rows (benchmarks/bench_embed.py): sentence-transformers' OpenVINO backend and
## its static INT8 in .venv-openvino (optimum-intel, openvino, nncf, transformers 5), from requirements/constraints-openvino.txt.
setup-openvino:
	bash scripts/setup_openvino_env.sh

CURRENT_PY := .venv-current/bin/python
CURRENT_QUICK := not train and not slow and not heavy and not ui
## What `make test` and `make test-current` run on the current stack: every test that does not train.
CURRENT_ALL := not train and not hosts and not room
## pytest-xdist workers for `make test` (2 on a 2-core machine; TEST_WORKERS=0 runs in one process). With
## --dist loadgroup the tests that share a module's fixture run on one worker, so it is built once.
TEST_WORKERS ?= 2

## Both stacks (what CI runs). First every test on the training stack (.venv): core, plots, widgets, notebooks,
## the real-browser tests, in a random order (pytest-randomly prints the seed; PYTEST_ARGS=--randomly-seed=N
## repeats it). Then, in .venv-current, every test that does not train (`make test-current`). Both on
## TEST_WORKERS workers (pytest-xdist); both run even when the first fails; either failing fails.
## The last lines say how long each took.
test:
	@$(MAKE) --no-print-directory -j2 setup-test setup-current  # side by side: one's pip unpacks while the other compiles
	@rc=0; t0=$$(date +%s); \
	$(PY) -m pytest -q -ra -p randomly -n $(TEST_WORKERS) --dist loadgroup -m "not room" --durations=25 $(PYTEST_ARGS) || rc=1; t1=$$(date +%s); \
	echo "make test: the training stack's run is done (exit $$rc); now the current stack's tests in .venv-current"; \
	$(CURRENT_PY) -m pytest -q -ra -p randomly -n $(TEST_WORKERS) --dist loadgroup -m "$(CURRENT_ALL)" --durations=15 $(PYTEST_ARGS) || rc=1; \
	t2=$$(date +%s); \
	echo "make test: training stack $$((t1 - t0)) s, current stack $$((t2 - t1)) s (exit $$rc)"; \
	exit $$rc

## The workshop room's test (marker `room`): make wheelhouse, then the training stack installed from it with no
## network in a fresh environment, its doctor and two ORTModule steps (downloads 3.4 GB once; minutes).
test-room: setup-test
	$(PY) -m pytest -q -ra -p no:randomly -m room --durations=5 $(PYTEST_ARGS)

## Every test that does not train (marker `train`), on the current stack in .venv-current.
test-current: setup-current
	$(CURRENT_PY) -m pytest -q -ra -p randomly -n $(TEST_WORKERS) --dist loadgroup -m "$(CURRENT_ALL)" --durations=15 $(PYTEST_ARGS)

## The current stack's quick tests: not train, slow, heavy or ui (a few minutes).
test-current-quick: setup-current
	$(CURRENT_PY) -m pytest -q -ra -p randomly -m "$(CURRENT_QUICK)" --durations=15 $(PYTEST_ARGS)

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

## The same graphs under both stacks' ONNX Runtimes (.venv's onnxruntime-training, .venv-current's onnxruntime),
## in alternating processes: the built-in MiniLM's fused FP32 and per-channel INT8 graphs, built once into
## $(RUNS)/bench/stacks/ (benchmarks/bench_stacks.py; BENCH_ARGS passes more, e.g. --settings workbench no-spin).
bench-stacks: setup setup-current
	$(PY) benchmarks/bench_stacks.py --venvs .venv .venv-current --work $(RUNS)/bench/stacks --out $(RUNS)/bench/bench_stacks.json $(BENCH_ARGS)

## The classifier's result file for the README's results table, from a demo run on a quiet machine:
## make classifier-result RUN=runs/<time>-demo writes benchmarks/results/classifier_minilm_<machine>_<date>.json;
## then `python docs/hooks/generated.py` puts it into the README.
classifier-result: setup
	$(PY) benchmarks/classifier_result.py $(RUN)

## The documentation site (mkdocs, Material theme) into site/; --strict: a broken link or a missing page fails.
## The command-line page is generated from the parser while it builds (docs/hooks/generated.py).
docs: setup-test
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

## ruff check on the code (rules: pyproject.toml [tool.ruff]); make test runs it too (tests/repo/test_docs.py).
lint: setup-test
	$(PY) -m ruff check .

## The documentation's pictures from a real run: a MiniLM `workbench demo` into $(RUNS) (about 10 min on 2 quiet cores;
## RUN=runs/<time>-demo shoots one already made instead: make the demo once on a quiet machine), then report.html and
## JupyterLab with the tour notebook (the run opened) and the other notebooks in headless Chromium; PNGs and manifest.json
## in docs/img/, and the README's picture block, with captions naming the run's machine and date.
screenshots: setup-test
	$(PY) scripts/screenshots.py --out docs/img --runs $(RUNS) $(if $(RUN),--run $(RUN))

clean:
	rm -rf .venv .pytest_cache test-output site
