#!/usr/bin/env bash
# The main job on the embedded default store (the local filesystem).
source "$(dirname "$0")/bootstrap.sh"
exec .venv/bin/aiocommit demo "$@"
