# Everything runs from .venv, made on first use: pip installs pip and uv, uv the packages (linked
# from its cache, where pip copies PySpark's 400 MB), or pip where it is told an index of yours.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8888
# Jupyter refuses to run as root unless told to (containers, CI machines).
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
# Java 17+, the JVM replay kernel built (or why the Python one will run), the Jupyter kernel.
CHECK = $(BIN)/dedup-lib doctor

.PHONY: help install lab test test-fast test-cluster class-data lint lint-code lint-types lint-duplicates lint-duplicates-tests docs bench profile-engine bench-simulate bench-load bench-synth bench-explorer bench-watch samples notebooks postmortem explore clean

help:
	@echo "make lab [INPUT=sends.parquet]  open JupyterLab on notebooks/ (installs on first use);"
	@echo "             INPUT: the telemetry the notebooks read (default: the samples)"
	@echo "make test    lint, the docs, then every test: unit, Spark (classic and Connect), notebooks, browser, wheel, cluster"
	@echo "make test-fast  the tests without Spark, a browser or the wheel (under a minute), for every edit"
	@echo "make test-cluster  make test's cluster tests alone: simulate and a notebook on a standalone Spark + Connect server"
	@echo "make lint    ruff, mypy, the import contracts (lint-imports), the Containerfile, code written twice (pylint)"
	@echo "make docs    the documentation site (Sphinx), warnings as errors: build/docs/index.html"
	@echo "make bench   engine benchmark against the shuffle-and-sort floor (ROWS=10000000, DATA=day)"
	@echo "make profile-engine  where the engine's time goes: SQL metrics and JFR, narrow and wide rows"
	@echo "make bench-simulate [ROWS=...] [REPEAT=2]  simulate with its diagnostics against its replay alone (10 M)"
	@echo "make bench-load   load_telemetry (with its tally) against one scan of every value (10 M)"
	@echo "make bench-synth  generator benchmark, 10 M sends against the same floor"
	@echo "make bench-watch [ROWS='1000000 10000000']  the live monitor against the batch replay of the same files"
	@echo "make bench-watch-cluster [ROWS=6000000]  the state on the executors on a standalone cluster, 1 GiB driver, P7D"
	@echo "make bench-soak [MINUTES=60]  the live monitor fed a file every 4 s: its memory flat over the hour"
	@echo "make bench-explorer [ROWS=...] [REPEAT=3] [RESULT_SIZE=1g]  explorer and sweep against one detect_duplicates run (10 M)"
	@echo "make bench-browser [ROWS=10000000]  notebook 02 in Chromium: first chart, redraws (200 k)"
	@echo "make samples regenerate data/samples/ (deterministic: same seed, same rows)"
	@echo "make postmortem INPUT=sends.parquet [WINDOW=PT10M] [ENTITY=orders] [START=..] [END=..]"
	@echo "             run the postmortem notebook headless; HTML report under reports/"
	@echo "make explore INPUT=sends.parquet [WINDOW=PT10M] [PARTITIONING=1] [EXPLORE_PORT=8866]"
	@echo "             serve the window explorer as a web page (Voila), for people without Jupyter"
	@echo "make notebooks  sync each notebooks/0*.py with its .ipynb (jupytext), ruff format, strip outputs"

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11+"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: Python 3.11+ is needed, $(PYTHON) is $$($(PYTHON) -V)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	@if [ -n "$$PIP_INDEX_URL" ] || $(BIN)/python -m pip config list | grep -q '\.index-url='; then \
		echo $(BIN)/python -m pip install --quiet -e "'.[dev]'"; \
		$(BIN)/python -m pip install --quiet -e '.[dev]'; \
	else \
		echo $(BIN)/uv pip install --quiet --config-file uv.toml -e "'.[dev]'"; \
		$(BIN)/uv pip install --quiet --config-file uv.toml --python $(BIN)/python -e '.[dev]'; \
	fi
	$(BIN)/python -c 'from dedup_lib.workbench.notebooks import install_kernel; install_kernel()'
	@touch $(STAMP)

install: $(STAMP)

# INPUT=path: the telemetry every notebook reads when its INPUT parameter is left at None
# (DEDUP_INPUT, made absolute when it is a local path: the kernels run in notebooks/).
lab: $(STAMP)
	@$(CHECK)
	$(if $(INPUT),DEDUP_INPUT="$(if $(wildcard $(INPUT)),$(abspath $(INPUT)),$(INPUT))") \
		$(BIN)/jupyter lab --notebook-dir=notebooks --port=$(PORT) $(LAB_FLAGS)

# The suite's own cache and log folder (conftest.py sets it for every process the run starts).
TEST_CACHE := $(CURDIR)/build/test-cache
# pytest-xdist workers for make test: one holds the run's own Spark session (tests/conftest.py,
# UNITS), the other takes JupyterLab, the notebooks' kernels and the command lines meanwhile.
WORKERS ?= 2

# Everything, the cluster tests (tests/cluster, as make test-cluster) included. The docs and
# the run's class-data archive come first, side by side (the tests' JVMs start from the archive;
# Sphinx rewrites docs/generated, which tests walk). Lint runs beside the tests, at the lowest
# priority: the tests leave a core idle now and then (a JVM starting, a page loading, a
# monitor's trigger), and lint takes those, not the tests' CPU. Its output comes after theirs;
# either failing fails the run.
# Python's bytecode for every process of the run, the docs' and pytest's own start included,
# in the run's cache even where the environment says PYTHONDONTWRITEBYTECODE (conftest.py).
test: export PYTHONPYCACHEPREFIX = $(TEST_CACHE)/pycache
test: export PYTHONDONTWRITEBYTECODE =
test: $(STAMP)
	@$(MAKE) --no-print-directory -j2 --output-sync=target docs class-data
	@DEDUP_LIB_CACHE=$(TEST_CACHE) $(CHECK)
	@mkdir -p build; \
	nice -n 19 $(MAKE) --no-print-directory -k -j2 --output-sync=target lint > build/lint.log 2>&1 & linting=$$!; \
	DEDUP_TEST_CLUSTER=1 $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup --no-loadscope-reorder \
		--nbval-lax --durations=15 \
		--junitxml=build/test-results.xml tests notebooks; tested=$$?; \
	wait $$linting; linted=$$?; \
	echo "== make lint, run beside the tests (build/lint.log) =="; cat build/lint.log; \
	[ $$linted -eq 0 ] || echo "make test: lint failed"; \
	[ $$tested -eq 0 ] && [ $$linted -eq 0 ]

# The run's JVM class-data archive (tests/class_data_kit.py), written beside the docs, which
# leave a core idle: the tests would otherwise wait for it before their first test.
class-data: $(STAMP)
	@DEDUP_LIB_CACHE=$(TEST_CACHE) $(BIN)/python tests/class_data_kit.py

# A standalone master, a worker and a Spark Connect server on 127.0.0.1 (tests/cluster_kit.py,
# logs in build/cluster/): simulate and a notebook against it, verdicts compared with a local
# run, then everything it started stopped by pid. Part of `make test`; this runs it alone.
test-cluster: $(STAMP)
	@DEDUP_LIB_CACHE=$(TEST_CACHE) $(CHECK)
	DEDUP_TEST_CLUSTER=1 $(BIN)/python -m pytest tests/cluster -v -s --durations=0

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not spark and not slow and not browser" --durations=10

# Code written twice (pyproject.toml, [tool.pylint.similarities]): the library and its benchmarks
# together, the tests apart (a test states the columns it expects on its own, on purpose).
DUPLICATES := --recursive=y --disable=all --enable=duplicate-code --score=n

# In parts, which make test runs side by side with the docs (-j): each of pylint's two passes
# takes as long as mypy.
lint: lint-code lint-types lint-duplicates lint-duplicates-tests

lint-code: $(STAMP)
	$(BIN)/ruff check conftest.py src tests benchmarks notebooks docs
	$(BIN)/ruff format --check conftest.py src tests benchmarks notebooks docs
	$(BIN)/lint-imports
	$(BIN)/hadolint Containerfile

lint-types: $(STAMP)
	$(BIN)/mypy

lint-duplicates: $(STAMP)
	$(BIN)/pylint $(DUPLICATES) src benchmarks

lint-duplicates-tests: $(STAMP)
	$(BIN)/pylint $(DUPLICATES) tests

# The site from docs/ and the docstrings; a warning (a broken link, bad markup) fails it.
# docs/generated/ (a page per API name) and the site are made afresh: a name dropped must not
# linger.
docs: $(STAMP)
	rm -rf docs/generated build/docs
	$(BIN)/sphinx-build -q -W --keep-going -b html docs build/docs

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_engine.py --rows $(or $(ROWS),10000000) $(if $(DATA),--data $(DATA))

# Spark's SQL metrics per operator and a JFR recording of the driver (the executor, in local
# mode) for the floor and the engine, narrow and wide rows: where the time goes.
profile-engine: $(STAMP)
	$(BIN)/python benchmarks/profile_engine.py --rows $(or $(ROWS),10000000)

# simulate (load, replay, summaries, diagnostics) against its replay alone, each in a process.
bench-simulate: $(STAMP)
	$(BIN)/python benchmarks/bench_simulate.py --rows $(or $(ROWS),10000000) $(if $(REPEAT),--repeat $(REPEAT))

bench-load: $(STAMP)
	$(BIN)/python benchmarks/bench_load.py --rows $(or $(ROWS),10000000)

bench-explorer: $(STAMP)
	$(BIN)/python benchmarks/bench_explorer.py --rows $(or $(ROWS),10000000) $(if $(REPEAT),--repeat $(REPEAT)) $(if $(RESULT_SIZE),--result-size $(RESULT_SIZE))

# Measured in Chromium (Debian's chromium package): the 200 k sample unless ROWS is given.
.PHONY: bench-browser
bench-browser: $(STAMP)
	$(BIN)/python benchmarks/bench_browser.py $(if $(ROWS),--rows $(ROWS)) --json bench-browser.json

# The live monitor against the batch replay of the same files, landed one at a time into a
# running monitor and all at once, PT10M and P1D (1 M and 10 M sends; about 40 minutes).
bench-watch: $(STAMP)
	$(BIN)/python benchmarks/bench_watch.py --rows $(or $(ROWS),1000000 10000000) \
		$(if $(REPEAT),--repeat $(REPEAT)) --json bench-watch.json

# The state on the executors on a standalone cluster (tests/cluster_kit.py) with a 1 GiB driver
# and executors at Spark's default heap: 6 M sends of P7D in 6 files, the driver's Python and
# JVM and the executor's peaks against 1 GiB, beside the batch replay on the same application.
.PHONY: bench-watch-cluster
bench-watch-cluster: $(STAMP)
	$(BIN)/python benchmarks/bench_watch_cluster.py --rows $(or $(ROWS),6000000) \
		--json bench-watch-cluster.json

# The live monitor (`dedup-lib watch`) fed a file every 4 s for MINUTES (60): its Python's and
# its JVM's memory by quarter, flat when the last quarter is within 1.1x the second.
.PHONY: bench-soak
bench-soak: $(STAMP)
	$(BIN)/python benchmarks/bench_soak.py --minutes $(or $(MINUTES),60) --json bench-soak.json

bench-synth: $(STAMP)
	$(BIN)/python benchmarks/bench_synth.py --rows $(or $(ROWS),10000000)

SAMPLES := data/samples
CUT := event_id,entity,message_id,send_time,partition_key,session_id,scheduled_enqueue_time,batch_id,logical_id,attempt
GENERATE := $(BIN)/dedup-lib generate --single-file --overwrite --quiet
samples: $(STAMP)
	$(GENERATE) $(SAMPLES)/day.parquet --scenario day --rows 200000 --seed 0
	$(GENERATE) $(SAMPLES)/day-azure.csv.gz --scenario day --rows 200000 --seed 0 \
		--format csv --names azure --columns $(CUT)
	$(GENERATE) $(SAMPLES)/day-python.jsonl.gz --scenario day --rows 200000 --seed 0 \
		--format json --names python --columns $(CUT)
	$(GENERATE) $(SAMPLES)/incident.parquet --scenario incident --rows 30000 --seed 0
	$(GENERATE) $(SAMPLES)/incident-otlp.jsonl.gz --scenario incident --rows 30000 --seed 0 \
		--format otlp
	$(GENERATE) $(SAMPLES)/incident-app-insights.csv.gz --scenario incident --rows 30000 \
		--seed 0 --format app-insights
	$(GENERATE) $(SAMPLES)/incident-app-insights.json.gz --scenario incident --rows 30000 \
		--seed 0 --format app-insights
	@mkdir -p $(SAMPLES)/incident-kept
	$(GENERATE) $(SAMPLES)/incident-kept/orders.json.gz --scenario incident --rows 30000 --seed 0 \
		--entity orders --kept-window PT1M --format sb-explorer
	@du -sh $(SAMPLES)

postmortem: $(STAMP)
	@test -n "$(INPUT)" || { echo "usage: make postmortem INPUT=path/to/sends [WINDOW=PT10M] [PARTITIONING=1] [ENTITY=name] [START=iso] [END=iso] [KEPT=export.json]"; exit 2; }
	@$(CHECK)
	$(BIN)/dedup-lib postmortem "$(INPUT)" --window $(or $(WINDOW),PT10M) \
		$(if $(PARTITIONING),--partitioning) $(if $(ENTITY),--entity "$(ENTITY)") \
		$(if $(START),--start "$(START)") $(if $(END),--end "$(END)") \
		$(if $(KEPT),--kept "$(KEPT)")

explore: $(STAMP)
	@test -n "$(INPUT)" || { echo "usage: make explore INPUT=path/to/sends [WINDOW=PT10M] [PARTITIONING=1] [EXPLORE_PORT=8866]"; exit 2; }
	@$(CHECK)
	$(BIN)/dedup-lib explore "$(INPUT)" --window $(or $(WINDOW),PT10M) --port $(or $(EXPLORE_PORT),8866) \
		$(if $(PARTITIONING),--partitioning)

# The .py files are the notebooks' reviewed source (notebooks/jupytext.toml pairs each with its
# .ipynb): sync whichever side was edited last, format the .py, carry that back to the .ipynb,
# and leave the .ipynb without outputs, as committed.
notebooks: $(STAMP)
	$(BIN)/jupytext --sync notebooks/0*.py
	$(BIN)/ruff check --fix --quiet notebooks/0*.py
	$(BIN)/ruff format --quiet notebooks/0*.py
	$(BIN)/jupytext --sync notebooks/0*.py
	$(BIN)/jupyter nbconvert --clear-output --inplace --log-level=WARN notebooks/0*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis spark-warehouse metastore_db
