#!/usr/bin/env bash
# The test command: lint, types, import layers, then every test tier (--all: unit,
# emulator, spark, slow; tests/README.md). Spark tests and the Hadoop interop tests need a
# JDK, installed here when missing. CI runs this, then the wheel check (.ci/run).
source "$(dirname "$0")/bootstrap.sh"
bash scripts/ensure_java.sh
.venv/bin/ruff check src tests stress testing examples conftest.py
.venv/bin/ruff format --check src tests stress testing examples conftest.py
.venv/bin/mypy
.venv/bin/lint-imports --no-cache  # the layers (pyproject.toml [tool.importlinter])
# two workers: most tests wait on subprocesses, emulators and JVMs; the Spark session's
# tests run first on one of them (one JVM; AIOCOMMIT_TEST_SPARK_SESSIONS=2: half on each,
# two JVMs; tests/tiers.py groups them), the rest module by module
exec .venv/bin/python -m pytest -q --all -n 2 --dist loadgroup --durations=15 "$@"
