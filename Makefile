# The README's two commands: `make demo` (main job) and `make test` (whole
# suite).  Both run the idempotent, cached set-up first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# Five test workers (pytest-xdist), a file each at a time: the suite waits on DDS,
# subprocesses and real-time physics as much as on the CPU (two workers left 43 %
# of two cores idle; from a clean tree today 3 workers took 322 s, 4 took 292 s,
# 5 took 281 s).  TEST_WORKERS=0: one process.
TEST_WORKERS ?= 5
DEMO_ARGS ?=
# DDS discovery stays on this machine unless the caller chose otherwise.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
# Python's bytecode cache (__pycache__, ignored by git) is written even where the
# environment sets PYTHONDONTWRITEBYTECODE: the demo and the suite start hundreds of
# Python processes, and each compiled every module it imported from source
# (bench/bench_startup.py).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo test check bench colcon clean help

help:
	@echo "make demo   - set up .venv and run the end-to-end demo"
	@echo "make test   - set up .venv and run the whole test suite"
	@echo "make check  - the fast inner loop: unit and integration tiers, tests marked slow left out"
	@echo "make bench  - run the benchmarks in bench/ (prints figures and ratios)"
	@echo "make clean  - remove build outputs (keeps .venv)"

setup:
	@bash tools/setup_env.sh

demo: setup
	$(VENV)/bin/safemanip demo $(DEMO_ARGS)

# Two stages: every tier but live in parallel, then the live tier (real-time assertions: deadlines,
# latencies, overrun lines) on its own, so no heavy neighbour (mypy, colcon, physics) shares its CPU; its
# two workers run light stacks that mostly wait (alone, one worker: 220 s; two: about 120 s).  Both stages
# run whatever the first gave; the exit status is the first failure's.
LIVE_WORKERS ?= 2
test: setup
	@rc=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m 'not live' $(PYTEST_ARGS) || rc=$$?; \
	$(PY) -m pytest -n $(LIVE_WORKERS) --dist loadfile -m live $(PYTEST_ARGS) || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	exit $$rc

# The inner loop: the unit and integration tiers but their tests marked slow (over about a second each;
# `make test` runs them).
CHECK_WORKERS ?= 3
check: setup
	$(PY) -m pytest -n $(CHECK_WORKERS) --dist loadfile -m '(unit or integration) and not slow' $(PYTEST_ARGS)

bench: setup
	$(VENV)/bin/safemanip bench

clean:
	rm -rf build install log .pytest_cache
