#!/usr/bin/env bash
# The main job: PySpark in local mode writes a partitioned dataset through aiocommit
# (df.write.format("aiocommit")) into a local directory (a new temp dir unless given),
# reads it back with spark.read.parquet and prints the commit summary.
#   scripts/demo.sh [DEST] [--rows N]
source "$(dirname "$0")/bootstrap.sh"
bash scripts/ensure_java.sh
exec .venv/bin/python examples/spark_demo.py "$@"
