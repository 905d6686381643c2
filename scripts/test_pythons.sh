#!/usr/bin/env bash
# The unit tier (plain pytest: tests/README.md) on every other Python that requires-python
# admits (3.12, 3.13; the main run, scripts/test.sh, runs every tier on 3.11), each in
# its own venv (.venv-3.12, .venv-3.13) with the `test` extra, which has no pyspark.
# The interpreters come from pyenv ($PYENV_ROOT/versions/3.12.*), or PYTHON_3_12=/path/to/python3.12 (likewise 3.13).
# Usage: scripts/test_pythons.sh [VERSION...] [-- PYTEST ARGS]   (default: 3.12 3.13)
# Env: AIOCOMMIT_PY_VENVS, where the venvs are kept (default: the checkout; .ci/run keeps
# them in ~/.cache/aiocommit/python-venvs, as scripts/test_pyspark_versions.sh its own, so a
# CI host that keeps $HOME installs Ray and the rest once, not on every clone);
# AIOCOMMIT_PY_TESTS, the test paths (default: the testpaths, unit tier);
# AIOCOMMIT_PY_EXTRAS, the extras installed (default: test; scripts/test_engines_pythons.sh
# adds the engines'), each set of extras in a venv of its own (.venv-3.12-engines...).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#versions[@]} -gt 0 ] || versions=(3.12 3.13)
# the emulator tier runs once, in scripts/test.sh: the same matrix on every Python would
# double its time; the Spark tier needs pyspark, which the test extra leaves out
read -r -a paths <<< "$(echo ${AIOCOMMIT_PY_TESTS:-})"

find_python() {
    local version="$1" override="PYTHON_${1//./_}" candidate
    if [ -n "${!override:-}" ]; then
        echo "${!override}"
        return
    fi
    local root="${PYENV_ROOT:-$HOME/.pyenv}"
    # the newest patch release installed under pyenv
    for candidate in $(ls -d "$root"/versions/"$version".* 2>/dev/null | sort -t. -k3 -n -r); do
        if [ -x "$candidate/bin/python$version" ]; then
            echo "$candidate/bin/python$version"
            return
        fi
    done
    if command -v "python$version" >/dev/null; then
        command -v "python$version"
        return
    fi
    echo "test_pythons: Python $version not found: not under $root/versions (pyenv install" \
        "$version) nor python$version on PATH; set $override to an interpreter" >&2
    return 1
}

status=0
for version in "${versions[@]}"; do
    started=$SECONDS
    python="$(find_python "$version")"
    extras="${AIOCOMMIT_PY_EXTRAS:-test}"
    venv="${AIOCOMMIT_PY_VENVS:-.}/.venv-$version"
    [ "$extras" = test ] || venv="$venv-${AIOCOMMIT_PY_VENV_SUFFIX:-extras}"
    if [ ! -x "$venv/bin/python" ]; then
        mkdir -p "$(dirname "$venv")"
        "$python" -m venv "$venv"
    fi
    stamp="$venv/.aiocommit-installed"
    # the extras, this checkout (a venv kept outside it serves the next clone too) and
    # the three pyproject files: any change re-installs (quick when only the path did)
    want="$extras $(pwd) $(cat pyproject.toml stress/pyproject.toml testing/pyproject.toml | sha256sum | cut -c1-16)"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet -e ./testing -e ./stress -e ".[$extras]"
        echo "$want" > "$stamp"
    fi
    echo "test_pythons: $("$venv/bin/python" --version) in $venv (ready in $((SECONDS - started)) s)"
    if "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=15 "${paths[@]}" "$@"; then
        echo "test_pythons: Python $version passed in $((SECONDS - started)) s"
    else
        echo "test_pythons: Python $version FAILED after $((SECONDS - started)) s" >&2
        status=1
    fi
done
exit $status
