#!/usr/bin/env bash
# Installs Apache Flink 2.3.0 (from the PyPI wheels apache-flink-libraries and
# apache-flink, no Python deps) into a venv under the cache folder.
#
# Usage: scripts/flink/install.sh
# Env:   JOBSTORE_FLINK_CACHE  cache folder (default: <repo root>/.flink)
#        PYTHON                python interpreter used to create the venv (default: python3)
# Stdout: the FLINK_HOME path (one line). All logs go to stderr.
# Idempotent: skips everything when $CACHE/venv/.jobstore-flink-installed exists.
set -euo pipefail

FLINK_VERSION=2.3.0
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
CACHE=${JOBSTORE_FLINK_CACHE:-$REPO_ROOT/.flink}
PY=${PYTHON:-python3}
VENV=$CACHE/venv
MARKER=$VENV/.jobstore-flink-installed

log() { printf '[flink-install] %s\n' "$*" >&2; }

find_flink_home() {
  local d
  for d in "$VENV"/lib/python3*/site-packages/pyflink; do
    if [ -x "$d/bin/start-cluster.sh" ] || [ -f "$d/bin/start-cluster.sh" ]; then
      printf '%s\n' "$d"
      return 0
    fi
  done
  return 1
}

if [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$FLINK_VERSION" ] && home=$(find_flink_home); then
  log "Flink $FLINK_VERSION already installed at $home"
  printf '%s\n' "$home"
  exit 0
fi

command -v java >/dev/null 2>&1 || { log "java not found on PATH (Flink needs Java 11+)"; exit 1; }
mkdir -p "$CACHE"

# Serialise concurrent installs (two test processes starting at once).
LOCK=$CACHE/.install.lock
if command -v flock >/dev/null 2>&1; then
  exec 9>"$LOCK"
  flock 9
  # Another process may have finished the install while we waited.
  if [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$FLINK_VERSION" ] && home=$(find_flink_home); then
    log "Flink $FLINK_VERSION installed by a concurrent run at $home"
    printf '%s\n' "$home"
    exit 0
  fi
fi

if [ -d "$VENV" ]; then
  log "removing incomplete venv $VENV"
  rm -rf "$VENV"
fi

start=$(date +%s)
log "creating venv $VENV"
"$PY" -m venv "$VENV" >&2
log "pip install --no-deps apache-flink-libraries==$FLINK_VERSION apache-flink==$FLINK_VERSION (about 330 MB)"
"$VENV/bin/pip" install --disable-pip-version-check --no-input --no-deps \
  "apache-flink-libraries==$FLINK_VERSION" "apache-flink==$FLINK_VERSION" >&2

home=$(find_flink_home) || { log "pyflink/bin/start-cluster.sh not found under $VENV"; exit 1; }
# Wheels do not always keep the executable bit on the shell scripts.
chmod +x "$home"/bin/* 2>/dev/null || true
[ -n "$(ls "$home"/lib/flink-dist*.jar 2>/dev/null)" ] || { log "no flink-dist jar in $home/lib"; exit 1; }

printf '%s\n' "$FLINK_VERSION" >"$MARKER"
log "installed Flink $FLINK_VERSION at $home in $(( $(date +%s) - start ))s"
printf '%s\n' "$home"
