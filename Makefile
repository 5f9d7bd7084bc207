# ledger-stream developer targets. Everything installs into .venv; Kafka jars are cached in
# ~/.cache/ledger-stream (LEDGER_HOME) and fetched from Maven Central once.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install jars test test-fast lint typecheck model simulate mutate fuzz demo bench falsify clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

jars: install
	$(BIN)/ledger-stream kafka fetch

lint: install
	$(BIN)/ruff check ledger_stream connectors tests

typecheck: install
	$(BIN)/mypy

## The whole suite, against a real Kafka the fixtures start (or LEDGER_KAFKA_BOOTSTRAP).
## It includes the protocol model's check (tests/model/, the same tests as `make model`).
## The type check runs beside the tests (nice 10: the tests' processes come first) and its
## verdict counts as much as theirs; it saves its half minute of wall time.
test: install jars lint
	@$(BIN)/python -c "print('type check (mypy) running beside the tests')"; \
	nice -n 10 $(BIN)/mypy > $(VENV)/mypy.log 2>&1 & types_pid=$$!; \
	$(BIN)/python -m pytest; tests=$$?; \
	wait $$types_pid; types=$$?; cat $(VENV)/mypy.log; \
	[ $$tests -eq 0 ] && [ $$types -eq 0 ]

## The protocol model (tests/model/): SPIN checks every configuration of tests/model/configs.txt
## (about 2 minutes; needs `spin` and `gcc`: apt-get install -y spin gcc). See docs/testing.md.
model: install
	$(BIN)/python -m pytest tests/model -q

## The deterministic simulation (ledger_stream/simulation/): N seeded schedules from SEED, on
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
## minutes on 2 cores); exit 1 on any violation, with the seed and case. docs/reliability.md.
fuzz: install
	$(BIN)/ledger-stream fuzz --cases 1000000 --seed $(SEED)

## Only the tests that need no broker.
test-fast: install
	$(BIN)/python -m pytest -m "not kafka"

## The demo: local Kafka, topics, processor, a scripted agent and connector; then stops.
demo: install jars
	$(BIN)/ledger-stream demo

## The full falsification matrix (16 scenarios, 53 cases, ~15 min): gate JSON + table, exit 1 on failure.
falsify: install jars
	$(BIN)/ledger-stream falsify --out falsify-report.json

## The benchmark (DESIGN §9): every arm, default sizes, ~17 min on 2 cores; see docs/benchmarks.md.
bench: install jars
	$(BIN)/ledger-stream bench --out bench.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
