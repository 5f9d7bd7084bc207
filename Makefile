# ledger-stream developer targets. Everything installs into .venv; Kafka jars are cached in
# ~/.cache/ledger-stream (LEDGER_HOME) and fetched from Maven Central once.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
CORE   := $(VENV)/.core-stamp
## The versions of every dev dependency CI last passed with (`make lock` rewrites it): pip
## takes them as constraints, so a new release of a tool cannot turn the build red on its own.
LOCK   := requirements-dev.lock

.PHONY: install prereqs lock check jars test test-fast lint typecheck model simulate mutate fuzz chaos demo bench falsify clean

install: $(STAMP) $(CORE)

$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' -c $(LOCK)
	touch $(STAMP)

## The compiled decision core (setup.py, ledger_stream/core.py): ledger_stream/domain built
## with mypyc beside its sources, again after any edit to them (a stale build is refused at
## import, and the sources run). `pip install -e .` alone runs the pure core.
$(CORE): $(STAMP) setup.py ledger_stream/core.py $(wildcard ledger_stream/domain/*.py) \
		ledger_stream/kafka/murmur2.c
	@echo "compiling the decision core (mypyc, about a minute)"
	LEDGER_BUILD_CORE=mypyc $(BIN)/python setup.py --quiet build_ext --inplace > $(VENV)/core-build.log 2>&1 \
		|| { cat $(VENV)/core-build.log; exit 1; }
	touch $(CORE)

## Rewrite the lock from a fresh install of the dev extras at their newest allowed versions.
lock:
	rm -rf $(VENV)-lock && $(PYTHON) -m venv $(VENV)-lock
	$(VENV)-lock/bin/pip install --quiet -e '.[dev]'
	{ echo "# pip constraints for make install: written by make lock (pip freeze of the dev extras)"; \
	  $(VENV)-lock/bin/pip freeze --exclude-editable; } > $(LOCK)
	rm -rf $(VENV)-lock

## The system programs the whole suite needs (.ci/prereqs): installed when run as root with
## apt-get, else named with the exact install command, in about a second.
prereqs:
	@PYTHON=$(PYTHON) .ci/prereqs

jars: install
	$(BIN)/ledger-stream kafka fetch

## ruff, and the import contracts of pyproject [tool.importlinter] (the product never
## imports the lab).
lint: install
	$(BIN)/ruff check ledger_stream ledger_lab connectors tests
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

## The edit loop, about a minute: lint, types, the decision core's tests and the simulation's
## (2,000 seeds instead of 100,000; `make simulate` runs more). No broker, no system tools.
check: install
	$(BIN)/ruff check ledger_stream ledger_lab connectors tests
	$(BIN)/lint-imports
	$(BIN)/mypy
	LEDGER_SIM_TEST_RUNS=2000 $(BIN)/python -m pytest -p no:cacheprovider -q \
		-o addopts="" tests/domain tests/simulation

## The whole suite, against a real Kafka the fixtures start (or LEDGER_KAFKA_BOOTSTRAP).
## It includes the protocol model's check (tests/model/, the same tests as `make model`).
## Two things run beside the main pytest, and their verdicts count as much as its own:
## the type check (nice 10), and a second pytest with the tests that start Kafka clusters of
## their own (marker own_cluster: the chaos soak, min ISR, the retention edge, the 3-node
## and CLI cluster tests), then, in the same lane, the directories of SIDE_LANE (left out of
## the main pytest) on a broker of its own. The main run waits on brokers and timeouts for
## most of its second half, so they cost CPU it leaves idle rather than wall time. The second
## lane starts once the protocol model's searches (nice 19, each with a time limit) are
## done, at most 8 minutes after the start, so that its brokers do not starve them.
## The falsification matrix (`make falsify`) is the third: its exit status is the release
## gate, and it too waits for the model's searches.
SIDE_LANE  := tests/gateway tests/operate tests/replay tests/upgrade
MODEL_DONE := $(VENV)/model-searches.done
AFTER_MODEL = waited=0; while [ ! -e $(MODEL_DONE) ] && [ $$waited -lt 480 ]; do \
	sleep 2; waited=$$((waited + 2)); done
test: prereqs install jars lint
	@echo "type check (mypy), the own-cluster tests and the falsification matrix (the release" \
		"gate) running beside the tests (logs in $(VENV))"; \
	rm -f $(MODEL_DONE); \
	nice -n 10 $(BIN)/mypy > $(VENV)/mypy.log 2>&1 & types_pid=$$!; \
	( $(AFTER_MODEL); exec $(BIN)/ledger-stream falsify --out $(VENV)/falsify-report.json ) \
		> $(VENV)/falsify.log 2> $(VENV)/falsify-progress.log & gate_pid=$$!; \
	( $(AFTER_MODEL); $(BIN)/python -m pytest -p no:cacheprovider -m own_cluster; own=$$?; \
	  $(BIN)/python -m pytest -p no:cacheprovider -m "not own_cluster" $(SIDE_LANE); \
	  side=$$?; [ $$own -eq 0 ] && [ $$side -eq 0 ] ) \
		> $(VENV)/own-cluster.log 2>&1 & own_pid=$$!; \
	LEDGER_MODEL_DONE_FILE=$(MODEL_DONE) $(BIN)/python -m pytest -m "not own_cluster" \
		$(addprefix --ignore=,$(SIDE_LANE)); \
	tests=$$?; \
	wait $$own_pid; own=$$?; echo "--- the second lane (own-cluster tests, then $(SIDE_LANE)):"; cat $(VENV)/own-cluster.log; \
	wait $$types_pid; types=$$?; cat $(VENV)/mypy.log; \
	wait $$gate_pid; gate=$$?; echo "--- the falsification matrix:"; cat $(VENV)/falsify.log; \
	[ $$gate -eq 0 ] || tail -n 40 $(VENV)/falsify-progress.log; \
	[ $$tests -eq 0 ] && [ $$own -eq 0 ] && [ $$types -eq 0 ] && [ $$gate -eq 0 ]

## The protocol model (tests/model/): SPIN checks every configuration of tests/model/configs.txt
## (about 2 minutes; needs `spin` and `gcc`: apt-get install -y spin gcc). See docs/testing.md.
model: install
	$(BIN)/python -m pytest tests/model -q

## The deterministic simulation (ledger_lab/simulation/): N seeded schedules from SEED, on
## every core; a failing seed prints its shortened trace (replay it with --replay SEED).
SEED ?= 0
N    ?= 100000
simulate: install
	$(BIN)/ledger-stream simulate --seed $(SEED) --runs $(N)

## Mutation testing of the decision core and the connector core (pyproject [tool.mutmut]),
## 10–20 minutes on 2 cores; `$(BIN)/mutmut results` lists the survivors. docs/testing.md.
mutate: install
	rm -rf mutants
	LEDGER_SIM_TEST_RUNS=800 LEDGER_SIM_WORKERS=1 $(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

## A million hostile records through the codec and the processor's input path (about 5
## minutes on 2 cores), then 200,000 coverage-guided ones (atheris, about 3 minutes); exit 1
## on any violation, with the seed and case (or the crash-* input). docs/reliability.md.
fuzz: install
	$(BIN)/ledger-stream fuzz --cases 1000000 --seed $(SEED)
	$(BIN)/ledger-stream fuzz --engine atheris --cases 200000 --seed $(SEED)

## The long chaos soak (ledger_lab/chaos/): 60 minutes of load on a 3-node cluster with
## 720 faults of every kind, a partition growth (6 to 12, `repartition`) a third of the way
## in and a rolling upgrade two thirds in, then the checker; about 70 minutes in all.
## CHAOS_RATE: the rate a shared 2-core machine held (docs/reliability.md).
CHAOS_RATE ?= 6
chaos: install jars
	$(BIN)/ledger-stream chaos --duration 3600 --rate $(CHAOS_RATE) --faults 720 \
		--grow-by 6 --upgrade --settle 600 --seed $(SEED) --out chaos-report.json

## Only the tests that need no broker.
test-fast: install
	$(BIN)/python -m pytest -m "not kafka"

## The demo: local Kafka, topics, processor, a scripted agent and connector; then stops.
demo: install jars
	$(BIN)/ledger-stream demo

## The full falsification matrix (18 scenarios, 56 cases, ~10 min; `make test` runs it too):
## gate JSON + table, exit 1 on failure.
falsify: install jars
	$(BIN)/ledger-stream falsify --out falsify-report.json

## The benchmark: every arm, default sizes, ~17 min on 2 cores; see docs/benchmarks.md.
bench: install jars
	$(BIN)/ledger-stream bench --out bench.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
