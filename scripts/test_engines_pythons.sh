#!/usr/bin/env bash
# The engines tier (Ray, Dask, Polars, Arrow: tests/integrations, `-m engines`) on the other
# Pythons requires-python admits (3.12, 3.13; scripts/test.sh runs it on 3.11), each in a venv
# of its own (.venv-3.12-engines, .venv-3.13-engines) with the `test` extra and the engines'.
# A step of its own in .ci/run, apart from the unit tier on those Pythons (test_pythons.sh).
# Usage: scripts/test_engines_pythons.sh [VERSION...] [-- PYTEST ARGS]   (default: 3.12 3.13)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
AIOCOMMIT_PY_EXTRAS="test,arrow,polars,dask,ray" AIOCOMMIT_PY_VENV_SUFFIX=engines \
    AIOCOMMIT_PY_TESTS="tests/integrations" \
    exec bash scripts/test_pythons.sh "${versions[@]}" -- -m engines "$@"
