#!/usr/bin/env bash
# The wheel is the product: build it, install it into fresh venvs, and run what the docs
# promise from a directory outside the checkout.
#   * the library's wheel holds no harness and no emulator code;
#   * with [all]: `aiocommit --help`, `aiocommit demo`, `aiocommit stress job --tasks 5`,
#     the emulators' `--help` (python -m aiocommit_testing.…);
#   * bare: the library imports without click and rich, and `aiocommit` exits 4 with the
#     line that says how to install the command line.
# CI runs it after the tests (.ci/run). Env: PYTHON (default python3).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
checkout="$(pwd)"
PYTHON="$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')"
work="$(mktemp -d "${TMPDIR:-/tmp}/aiocommit-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# the library, and the harness and emulators (distributions of their own, which the
# `stress` and `testing` extras bring: found here in dist/)
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" \
    "$checkout" "$checkout/stress" "$checkout/testing"
wheel="$(ls "$work"/dist/aiocommit-0*.whl)"
echo "wheel_check: built $(cd "$work/dist" && ls)"
cd "$work"  # from here on nothing may come from the checkout

# the library's wheel holds the library alone: no harness, no emulator
inside="$("$PYTHON" -m zipfile -l "$wheel")"
if grep -E "aiocommit_stress|aiocommit_testing|aiocommit/stress/|aiocommit/testing/|emulator|chaos_proxy" <<< "$inside"; then
    echo "wheel_check: $(basename "$wheel") holds harness or emulator code (above)" >&2
    exit 1
fi

"$PYTHON" -m venv "$work/all"
"$work/all/bin/python" -m pip install --quiet --find-links "$work/dist" "$wheel[all]"
where="$("$work/all/bin/python" -c 'import aiocommit; print(aiocommit.__file__)')"
case "$where" in
    "$work"/all/*) ;;
    *) echo "wheel_check: aiocommit imported from $where, not the fresh venv" >&2; exit 1 ;;
esac
"$work/all/bin/aiocommit" --help >/dev/null
"$work/all/bin/aiocommit" stress --help >/dev/null
"$work/all/bin/python" -m aiocommit --version
"$work/all/bin/aiocommit" demo "$work/demo-output"
"$work/all/bin/aiocommit" show "$work/demo-output" >/dev/null
"$work/all/bin/aiocommit" stress job --tasks 5
# the emulators the docs run (docs/stores/*.md), from the testing extra
"$work/all/bin/python" -m aiocommit_testing.adls_emulator --help >/dev/null
"$work/all/bin/python" -m aiocommit_testing.gcs_emulator --help >/dev/null
"$work/all/bin/python" -m aiocommit_testing.s3_emulator --help >/dev/null
"$work/all/bin/python" -m aiocommit_stress --help >/dev/null
# demo into a relative path (issue 37): from the working directory, as a user types it
(cd "$work" && "$work/all/bin/aiocommit" demo ./relative-demo --tasks 2 >/dev/null)
test -f "$work/relative-demo/_SUCCESS"
echo "wheel_check: [all] ok: --help, stress --help, --version, demo, show, stress job, the emulators"

# the docs' examples (tests/docs/test_examples.py, slow tier: -m selects them), each run by the fresh venv's aiocommit
# and python; the test module itself runs from the checkout's test venv (scripts/test.sh
# makes it: pytest and the test fixtures), when there is one
if [ -x "$checkout/.venv/bin/python" ]; then
    (cd "$checkout" && AIOCOMMIT_DOCS_BIN="$work/all/bin" "$checkout/.venv/bin/python" \
        -m pytest -q -p no:cacheprovider -m docs_examples tests/docs/test_examples.py)
    echo "wheel_check: the docs' examples ran from the wheel"
fi

"$PYTHON" -m venv "$work/bare"
"$work/bare/bin/python" -m pip install --quiet "$wheel"
"$work/bare/bin/python" - <<'PY'
import sys

import aiocommit
import aiocommit.stores.faulty
import aiocommit.stores.memory

extras = sorted(m for m in ("click", "rich", "aiohttp", "pyspark") if m in sys.modules)
assert not extras, f"the bare library imported {extras}"
PY
set +e
message="$("$work/bare/bin/aiocommit" --help 2>&1)"
code=$?
set -e
if [ "$code" -ne 4 ] || [[ "$message" != *"pip install 'aiocommit[cli]'"* ]]; then
    echo "wheel_check: bare 'aiocommit --help' exited $code: $message" >&2
    exit 1
fi
echo "wheel_check: bare ok: the library imports alone; aiocommit says: $message"
