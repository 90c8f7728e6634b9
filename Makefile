# dispatcher — the two commands of the quick start are `make demo` and `make test`.
# Each creates .venv and installs what it needs on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEV_STAMP := $(VENV)/.installed-dev
EMULATOR_STAMP := $(VENV)/.installed-emulator
LOCAL_STAMP := $(VENV)/.installed-local
BENCH_STAMP := $(VENV)/.installed-bench
LANES_DEMO_STAMP := $(VENV)/.installed-lanes-demo
BENCH_ARGS ?=
DEMO_ARGS ?=
LOCAL_ARGS ?=
PYTEST_ARGS ?=
SOAK_ARGS ?=

# The Lambda runs python3.13 on arm64: its artifact is built from wheels for that
# platform, so no Docker and no local python3.13 are needed.
export SAM_CLI_TELEMETRY := 0

LAMBDA_PLATFORM := --platform manylinux2014_aarch64 --implementation cp --python-version 3.13 --only-binary=:all:

.PHONY: demo demo-lanes demo-gates demo-tenants demo-adaptive demo-sizes local test bench lint typecheck template-lint complexity unit integration infra soak validate build clean

$(DEV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# The demo needs the package and the emulator only, not the dev toolchain.
$(EMULATOR_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[emulator]'
	touch $@

# The lanes demo draws its plot: the emulator and matplotlib.
$(LANES_DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[emulator,bench]'
	touch $@

# `dispatcher local` also needs moto's CloudFormation (for --stack).
$(LOCAL_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[local]'
	touch $@

## demo: drain a backlog against an embedded AWS emulator (no account, no Docker)
demo: $(EMULATOR_STAMP)
	$(BIN)/python -m tools.demo $(DEMO_ARGS)

## demo-lanes: an urgent lane overtakes a backfill in one pool, drawn to lanes.png (DEMO_ARGS="--plot PATH")
demo-lanes: $(LANES_DEMO_STAMP)
	$(BIN)/python -m tools.lanes_demo --plot lanes.png $(DEMO_ARGS)

## demo-gates: executions wait at a gate while at most MAX are inside, drawn to gates.png (DEMO_ARGS="--plot PATH")
demo-gates: $(LANES_DEMO_STAMP)
	$(BIN)/python -m tools.gates_demo --plot gates.png $(DEMO_ARGS)

## demo-adaptive: an adaptive pool learns a downstream's hidden capacity, drawn to adaptive.png
demo-adaptive: $(LANES_DEMO_STAMP)
	$(BIN)/python -m tools.adaptive_demo --plot adaptive.png $(DEMO_ARGS)

## demo-sizes: a large job gets its room in a pool kept busy by small ones, drawn to sizes.png
demo-sizes: $(LANES_DEMO_STAMP)
	$(BIN)/python -m tools.sizes_demo --plot sizes.png $(DEMO_ARGS)

## demo-tenants: one noisy tenant and twenty quiet ones, without and with fair share, drawn to tenants.png
demo-tenants: $(LANES_DEMO_STAMP)
	$(BIN)/python -m tools.tenants_demo --plot tenants.png $(DEMO_ARGS)

## local: the embedded emulator with a stack "dispatcher-local" on 127.0.0.1:4567, ticking every 10 s
local: $(LOCAL_STAMP)
	$(BIN)/dispatcher local $(LOCAL_ARGS)

## test: every quality gate and the whole suite
# Three workers on two cores: many tests wait on CLI subprocesses and emulator threads, and
# a third worker fills that idle time. The fault scenarios' figures are added up across them.
# Work stealing keeps the three busy to the end (a few tests take 10-20 s).
TEST_WORKERS ?= 3

test: lint typecheck template-lint complexity
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --cov --cov-branch --cov-report=term-missing:skip-covered $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(DEV_STAMP)
	$(BIN)/mypy dispatcher

template-lint: $(DEV_STAMP)
	$(BIN)/cfn-lint template.yaml

## complexity: radon's grades of dispatcher/ within the budget (tools/complexity.py)
complexity: $(DEV_STAMP)
	$(BIN)/python -m tools.complexity

unit: $(DEV_STAMP)
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

integration: $(DEV_STAMP)
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

infra: $(DEV_STAMP)
	$(BIN)/python -m pytest tests/infra $(PYTEST_ARGS)

$(BENCH_STAMP): $(DEV_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

## bench: the dispatcher against its baselines, with figures and a plot (BENCH_ARGS="--quick")
bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

## soak: thousands of generated fault scenarios, with figures (SOAK_ARGS="--scenarios N --first-seed S")
soak: $(DEV_STAMP)
	$(BIN)/python -m tests.faults.soak $(SOAK_ARGS)

## validate: `sam validate --lint`
validate: $(DEV_STAMP)
	$(BIN)/sam validate --lint

## build: `sam build` without Docker (arm64 / python3.13 wheels)
build: $(DEV_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/sam build

# Called by `sam build` (BuildMethod: makefile) with ARTIFACTS_DIR set.
build-DispatcherFunction:
	$(PYTHON) -m pip install --quiet --no-compile --no-warn-conflicts $(LAMBDA_PLATFORM) --target "$(ARTIFACTS_DIR)" '.[function]'
	rm -rf "$(ARTIFACTS_DIR)/bin" "$(ARTIFACTS_DIR)/dispatcher/local"

clean:
	rm -rf .aws-sam build *.egg-info .pytest_cache .mypy_cache .ruff_cache .coverage htmlcov
