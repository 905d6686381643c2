#!/usr/bin/env bash
# The fast tests on every other Python that requires-python admits (3.12, 3.13; the main
# run, scripts/test.sh, is 3.11), each in its own venv (.venv-3.12, .venv-3.13) with the
# `test` extra: everything but Spark. The interpreters come from pyenv
# ($PYENV_ROOT/versions/3.12.*), or PYTHON_3_12=/path/to/python3.12 (likewise 3.13).
# Usage: scripts/test_pythons.sh [VERSION...] [-- PYTEST ARGS]   (default: 3.12 3.13)
# Env: AIOCOMMIT_PY_TESTS, the test paths (default below).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

versions=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do versions+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#versions[@]} -gt 0 ] || versions=(3.12 3.13)
# a cross-section that keeps the added time small: the protocol's files, the API and
# its errors, logs and metrics, options, job states, the cloud stores' SDKs against their
# emulators, the command line and the example service (all of it: AIOCOMMIT_PY_TESTS=tests)
fast="tests/protocol tests/engine/test_api.py tests/engine/test_error_root.py
tests/engine/test_job_report.py tests/engine/test_options.py tests/engine/test_job_states.py
tests/engine/test_bad_input_refused.py tests/engine/test_cloud_stores.py
tests/cli/test_commit.py tests/cli/test_show.py tests/cli/test_output.py tests/examples"
read -r -a paths <<< "$(echo ${AIOCOMMIT_PY_TESTS:-$fast})"
# the few tests that import the Spark integration (pyarrow, pyspark) run on 3.11 only
spark=(
    --ignore=tests/protocol/test_uris.py
    --ignore=tests/engine/test_names.py
    --ignore=tests/cli/test_launcher.py
    --deselect=tests/engine/test_options.py::test_spark_writer_refuses_a_typo
)

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
    venv=".venv-$version"
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    stamp="$venv/.aiocommit-installed"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet -e ./testing -e ./stress -e '.[test]'
        touch "$stamp"
    fi
    echo "test_pythons: $("$venv/bin/python" --version) in $venv (ready in $((SECONDS - started)) s)"
    if "$venv/bin/python" -m pytest -q -p no:cacheprovider "${paths[@]}" "${spark[@]}" "$@"; then
        echo "test_pythons: Python $version passed in $((SECONDS - started)) s"
    else
        echo "test_pythons: Python $version FAILED after $((SECONDS - started)) s" >&2
        status=1
    fi
done
exit $status
