# Sourced by the other scripts: a project venv with the package and its test tools.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
stamp=.venv/.aiocommit-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ stress/pyproject.toml -nt "$stamp" ] || [ testing/pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    # the harness and the emulators are distributions of their own (stress/, testing/)
    .venv/bin/python -m pip install --quiet -e ./testing -e ./stress -e '.[dev]'
    touch "$stamp"
fi
