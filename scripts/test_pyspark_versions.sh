#!/usr/bin/env bash
# The older pyspark releases aiocommit claims (pyproject.toml: pyspark>=3.5,<4.4), each in
# its own venv with only pyspark pinned: a representative part of the Spark suite. The
# newest release (the dev venv's) runs the whole suite in scripts/test.sh.
#
#   bash scripts/test_pyspark_versions.sh [X.Y.Z ...]     (default: all of RELEASES)
#
# Venvs are kept between runs under $AIOCOMMIT_PYSPARK_VENVS (default
# ~/.cache/aiocommit/pyspark-venvs), one per minor release (pyspark-X.Y); each run
# re-installs this checkout into them (quick when nothing else changed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure_java.sh

RELEASES=(${@:-3.5.9 4.0.5 4.1.4 4.2.1})
VENVS="${AIOCOMMIT_PYSPARK_VENVS:-$HOME/.cache/aiocommit/pyspark-venvs}"
PYTHON="${PYTHON:-python3}"

#: on pyspark 4.x: the seam, write(), exactly-once (a retried attempt), speculation on a
#: standalone cluster, Spark-writer parity (partition names, types, save modes, errors)
#: the tables (saveAsTable, insertInto, a managed table) and Spark Connect (format and write()),
#: write(engine="jvm") (the committer in aiocommit's jar against that release's Hadoop);
#: parity, exactly-once and abort run on both engines on every release (the parity cases
#: through each_engine); speculation (a standalone cluster, the slowest case) runs on one
#: engine a release, in turn: the JVM engine on 4.0 and 4.2, the Python writer (format) on
#: 4.1 (both run on the newest release in scripts/test.sh)
SUBSET_4=(
    tests/spark/test_seam.py
    tests/spark/test_map_in_arrow.py
    tests/spark/test_jvm_engine.py
    tests/spark/test_write.py::test_failed_first_attempt_is_retried_exactly_once
    tests/spark/test_engine_choice.py::test_exactly_once_and_abort_on_both_engines
    tests/spark/test_write.py::test_partition_that_always_fails_aborts
    tests/spark/test_parity.py::test_partition_directory_names_of_every_type
    tests/spark/test_parity.py::test_every_type_reads_back_as_from_sparks_writer
    tests/spark/test_parity.py::test_save_modes
    tests/spark/test_parity.py::test_errorifexists_and_ignore_as_sparks_writer
    tests/spark/test_drop_in.py::test_tables_save_as_table_and_insert_into
    tests/spark/test_parity.py::test_save_as_table_without_a_path_makes_a_managed_table
    tests/spark/test_parity.py::test_spark_connect_client_writes_with_every_mode_and_partition_by
)
SPECULATION=tests/spark/test_speculation.py::test_speculation_on_a_standalone_cluster_is_exactly_once
#: on pyspark 3.5 (no Python data source API): the seam, the writer's type checks, and
#: write() (exactly-once and parity: test_map_in_arrow), speculation included;
#: write(engine="jvm") refused with its reason (Hadoop 3.3.4 has no ManifestCommitter)
SUBSET_3=(
    tests/spark/test_seam.py
    tests/spark/test_commit_units.py
    tests/spark/test_map_in_arrow.py
    tests/spark/test_jvm_engine.py
    "tests/spark/test_speculation.py::test_speculation_on_a_standalone_cluster_is_exactly_once[write]"
)

for release in "${RELEASES[@]}"; do
    minor="${release%.*}"
    venv="$VENVS/pyspark-$minor"
    want="$release $(pwd) $(sha256sum pyproject.toml | cut -c1-16)"
    if [ ! -x "$venv/bin/python" ]; then
        mkdir -p "$VENVS"
        "$PYTHON" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
    fi
    if [ "${minor%%.*}" -ge 4 ]; then
        case "$minor" in
            4.1) speculation_engine=format ;;
            *) speculation_engine=jvm ;;
        esac
        subset=("${SUBSET_4[@]}" "$SPECULATION[$speculation_engine]")
        pyspark="pyspark[connect]==$release"  # the Spark Connect client, for the Connect tests
    else
        subset=("${SUBSET_3[@]}")
        pyspark="pyspark==$release"
    fi
    if [ "$(cat "$venv/.aiocommit-installed" 2>/dev/null)" != "$want" ]; then
        "$venv/bin/python" -m pip install --quiet -e ./testing -e ".[spark,testing,s3]" \
            pytest pytest-asyncio pytest-timeout hypothesis "moto[server]" "$pyspark"
        echo "$want" > "$venv/.aiocommit-installed"
    fi
    echo "== pyspark $release: ${#subset[@]} test files/cases in $venv"
    start=$SECONDS
    "$venv/bin/python" -m pytest -q -x -p no:cacheprovider --all --durations=15 "${subset[@]}"
    echo "== pyspark $release: passed in $((SECONDS - start)) s"
done
