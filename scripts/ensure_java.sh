#!/usr/bin/env bash
# Make sure a Java runtime for PySpark 4 (Java 17 or newer) is on PATH; if not, install
# OpenJDK 17's headless JRE with apt-get (as root, or through sudo).
set -euo pipefail

java_major() {
    # `java -version` prints e.g.: openjdk version "17.0.15" 2025-04-15  (or "1.8.0_392")
    java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -n 1 |
        awk -F. '{ print ($1 == 1) ? $2 : $1 }'
}

if command -v java >/dev/null 2>&1; then
    major="$(java_major)"
    if [ -n "$major" ] && [ "$major" -ge 17 ]; then
        exit 0
    fi
    echo "ensure_java: java ${major:-of unknown version} found; PySpark 4 needs 17+" >&2
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_java: no Java 17+ and no apt-get; install a JRE 17 and put java on PATH" >&2
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
echo "ensure_java: installing openjdk-17-jre-headless" >&2
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
    openjdk-17-jre-headless
java -version
