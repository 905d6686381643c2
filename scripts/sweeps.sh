#!/usr/bin/env bash
# The heavy randomized sweeps, at their full counts (CI runs this after scripts/test.sh;
# the test tiers run a sample of each): concurrent jobs on one destination, checked
# against every serial order (stress/README.md, "Sweeps"). Each store's figures print as
# it ends; exits 1 when any scenario was inexact, after every store ran.
source "$(dirname "$0")/bootstrap.sh"
status=0
sweep() { .venv/bin/python -m aiocommit_stress sweep concurrent-jobs "$@" || status=1; }
sweep --store memory --scenarios 100
sweep --store local --scenarios 100 --kills 30
sweep --store s3 --scenarios 100 --kills 30
sweep --store adls --scenarios 20 --kills 20
sweep --store gcs --scenarios 20 --kills 20
exit "$status"
