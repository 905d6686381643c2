#!/usr/bin/env bash
# The test command: lint, types, then the test suite. CI runs exactly this.
source "$(dirname "$0")/bootstrap.sh"
.venv/bin/ruff check src tests stress
.venv/bin/ruff format --check src tests stress
.venv/bin/mypy
exec .venv/bin/python -m pytest -q "$@"
