#!/usr/bin/env bash
# Make sure a JDK 17 or newer is on PATH: PySpark 4 needs the runtime, and the Hadoop
# interop tests (tests/interop) run Hadoop's committer through Java's source launcher,
# which needs javac's compiler. If not, install OpenJDK 17's headless JDK with apt-get
# (as root, or through sudo).
set -euo pipefail

java_major() {
    # `java -version` prints e.g.: openjdk version "17.0.15" 2025-04-15  (or "1.8.0_392")
    java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -n 1 |
        awk -F. '{ print ($1 == 1) ? $2 : $1 }'
}

if command -v java >/dev/null 2>&1; then
    major="$(java_major)"
    if [ -n "$major" ] && [ "$major" -ge 17 ] && command -v javac >/dev/null 2>&1; then
        exit 0
    fi
    echo "ensure_java: java ${major:-of unknown version} found; need a JDK 17+ (java, javac)" >&2
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_java: no JDK 17+ and no apt-get; install a JDK 17 and put java on PATH" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "ensure_java: installing Java needs root (or sudo)" >&2
        exit 1
    fi
fi
echo "ensure_java: installing openjdk-17-jdk-headless" >&2
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
    openjdk-17-jdk-headless
java -version
