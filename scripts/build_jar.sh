#!/usr/bin/env bash
# Build src/aiocommit/integrations/spark/aiocommit-spark.jar from java/ (the committer of
# write(df, dest, engine="jvm")): javac --release 17 against the Hadoop classes of the
# installed pyspark (hadoop-client-api, -runtime), jar entries dated 2000-01-01 so that a rebuild
# of the same source gives the same classes. The jar is committed (the wheel ships it; no
# JDK needed to build or install the wheel); tests/spark/test_jvm_engine.py rebuilds it
# and fails if the committed jar no longer holds the source's classes.
# Usage: scripts/build_jar.sh [OUT_JAR]   Env: PYTHON (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-src/aiocommit/integrations/spark/aiocommit-spark.jar}"
python="${PYTHON:-.venv/bin/python}"
jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
work="$(mktemp -d "${TMPDIR:-/tmp}/aiocommit-jar.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# the runtime jar holds the shaded annotations of Hadoop's manifest classes
classpath="$(ls "$jars"/hadoop-client-api-*.jar):$(ls "$jars"/hadoop-client-runtime-*.jar)"
javac --release 17 -Xlint:all,-path -Werror -cp "$classpath" -d "$work/classes" \
    $(find java -name '*.java' | sort)
jar --create --date=2000-01-01T00:00:02Z --file "$out" -C "$work/classes" .
echo "build_jar: $out"
