#!/usr/bin/env bash
# One benchmark run alternately from two checkouts (A, then B, PAIRS times, same
# arguments), then the median of every figure of each side and the ratio B/A.
#
#   bash stress/ab.sh [-n PAIRS] A_CHECKOUT B_CHECKOUT -- bench ops --store memory,local
#
# Each checkout runs its own harness: `python -m aiocommit_stress` where it has the
# top-level stress/ project, else `python -m aiocommit.stress` (before the package cut),
# with PYTHONPATH set to that checkout's sources. The harness arguments follow `--`;
# `--json` (one file per run) and `--no-progress` are added here. Runs and their JSON
# go to $AB_OUT (default: a new temporary directory); the load is printed before each run.
# Env: PYTHON (default: .venv/bin/python of this checkout), AB_KEYS (a regular expression:
# the figures printed; default: CPU and seconds figures).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pairs=5
if [ "${1:-}" = "-n" ]; then pairs="$2"; shift 2; fi
[ $# -ge 3 ] && [ "$3" = "--" ] || {
    echo "usage: bash stress/ab.sh [-n PAIRS] A_CHECKOUT B_CHECKOUT -- HARNESS ARGS..." >&2
    exit 2
}
a="$(cd "$1" && pwd)"; b="$(cd "$2" && pwd)"; shift 3
python="${PYTHON:-$here/.venv/bin/python}"
out="${AB_OUT:-$(mktemp -d /tmp/ab.XXXXXX)}"
mkdir -p "$out"

run() {  # run SIDE CHECKOUT INDEX
    local side="$1" checkout="$2" index="$3" module path
    shift 3
    if [ -d "$checkout/stress/aiocommit_stress" ]; then
        module=aiocommit_stress
        path="$checkout/src:$checkout/stress:$checkout/testing"
    else
        module=aiocommit.stress
        path="$checkout/src"
    fi
    echo "$side $index: $(uptime | sed 's/.*load/load/')"
    (cd "$checkout" && PYTHONPATH="$path" "$python" -m "$module" "$@" --no-progress \
        --json "$out/$side-$index.json" >"$out/$side-$index.log" 2>&1) || {
        echo "$side $index failed: $out/$side-$index.log" >&2
        tail -20 "$out/$side-$index.log" >&2
        exit 1
    }
}

echo "A: $a ($(git -C "$a" rev-parse --short HEAD))"
echo "B: $b ($(git -C "$b" rev-parse --short HEAD))"
echo "args: $* (pairs: $pairs, runs in $out)"
for index in $(seq 1 "$pairs"); do
    run A "$a" "$index" "$@"
    run B "$b" "$index" "$@"
done

"$python" - "$out" "$pairs" "${AB_KEYS:-cpu|seconds}" <<'EOF'
import json
import re
import statistics
import sys
from pathlib import Path

out, pairs, keys = Path(sys.argv[1]), int(sys.argv[2]), re.compile(sys.argv[3])


def figures(value, prefix=""):
    """Every numeric leaf of a run's JSON but the machine, by dotted path."""
    if isinstance(value, dict):
        for key, child in value.items():
            if prefix or key != "machine":
                yield from figures(child, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield prefix, float(value)


runs = {
    side: [dict(figures(json.loads((out / f"{side}-{i}.json").read_text())))
           for i in range(1, pairs + 1)]
    for side in "AB"
}
names = [n for n in runs["A"][0] if keys.search(n) and all(n in r for r in runs["A"] + runs["B"])]
width = max(map(len, names), default=10)
print(f"{'figure':<{width}}  {'A median':>10}  {'B median':>10}  {'B/A':>6}")
for name in names:
    a = statistics.median(r[name] for r in runs["A"])
    b = statistics.median(r[name] for r in runs["B"])
    ratio = f"{b / a:6.3f}" if a else "     -"
    print(f"{name:<{width}}  {a:10.3f}  {b:10.3f}  {ratio}")
EOF
