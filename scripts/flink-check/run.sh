#!/usr/bin/env bash
# Reads a `jobstore export` directory with Flink 2.3.0's own FileSystemJobResultStore and
# FileSystemApplicationResultStore and prints what Flink read, one JSON object per entry
# (see ReadJobResultStore.java for the fields).
#
# Usage: scripts/flink-check/run.sh EXPORT_DIR
# Env:   JOBSTORE_FLINK_CACHE  cache folder (default: <repo root>/.flink), as scripts/flink/install.sh
# Needs: Java 17 (java, javac) and Python 3 with pip the first time (Flink is installed from
#        PyPI by scripts/flink/install.sh). The compiled class is cached under the cache
#        folder, keyed by the source's hash.
# Stdout: the JSON lines only. Logs go to stderr. Exit status: the checker's (non-zero when
#         Flink cannot read the directory).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
CACHE=${JOBSTORE_FLINK_CACHE:-$REPO_ROOT/.flink}
SRC=$SCRIPT_DIR/ReadJobResultStore.java

log() { printf '[flink-check] %s\n' "$*" >&2; }

if [ $# -ne 1 ]; then
  echo "usage: $0 EXPORT_DIR" >&2
  exit 2
fi
EXPORT_DIR=$1
[ -d "$EXPORT_DIR" ] || { log "$EXPORT_DIR is not a directory"; exit 2; }

for tool in java javac; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool not found on PATH (install a JDK 17, e.g. apt-get install openjdk-17-jdk-headless)"; exit 1; }
done

FLINK_HOME=$(JOBSTORE_FLINK_CACHE=$CACHE bash "$REPO_ROOT/scripts/flink/install.sh")
[ -n "$(ls "$FLINK_HOME"/lib/flink-dist*.jar 2>/dev/null)" ] || { log "no flink-dist jar in $FLINK_HOME/lib"; exit 1; }
CP_FLINK="$FLINK_HOME/lib/*"

key=$( { sha256sum "$SRC"; printf '%s\n' "$FLINK_HOME"; } | sha256sum | cut -c1-16)
CLASSES=$CACHE/flink-check/$key
if [ ! -f "$CLASSES/ReadJobResultStore.class" ]; then
  mkdir -p "$CACHE/flink-check"
  # Serialise concurrent compiles (tests running in parallel).
  exec 9>"$CACHE/flink-check/.compile.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ ! -f "$CLASSES/ReadJobResultStore.class" ]; then
    log "compiling ReadJobResultStore.java against $FLINK_HOME/lib"
    tmp=$(mktemp -d "$CACHE/flink-check/.build.XXXXXX")
    javac -nowarn -cp "$CP_FLINK" -d "$tmp" "$SRC" >&2
    rm -rf "$CLASSES"
    mv "$tmp" "$CLASSES"
  fi
  exec 9>&-
fi

exec java -Xmx256m \
  -Dlog4j.configurationFile="$SCRIPT_DIR/log4j2.properties" \
  -Djava.io.tmpdir="${TMPDIR:-/tmp}" \
  -cp "$CLASSES:$CP_FLINK" ReadJobResultStore "$EXPORT_DIR"
