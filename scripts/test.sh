#!/usr/bin/env bash
# The test command: lint, types, then the test suite (Spark tests need Java, installed
# here when missing). CI runs exactly this.
source "$(dirname "$0")/bootstrap.sh"
bash scripts/ensure_java.sh
.venv/bin/ruff check src tests stress examples
.venv/bin/ruff format --check src tests stress examples
.venv/bin/mypy
exec .venv/bin/python -m pytest -q "$@"
