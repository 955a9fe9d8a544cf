#!/usr/bin/env bash
# Builds the probe job (scripts/flink/probe-job) into $CACHE/probe-job.jar.
#
# Usage: scripts/flink/build-probe-job.sh
# Env:   JOBSTORE_FLINK_CACHE  cache folder (default: <repo root>/.flink)
#        FLINK_HOME            Flink install to compile against (default: output of install.sh,
#                              which installs Flink first if needed)
# Stdout: the jar path (one line). Logs go to stderr.
# Rebuilds only when a file under probe-job/ (or this script) is newer than the jar.
# Job args: <records (0 = unbounded)> <records per second (0 = no limit)> <job name>
#           [snapshot sleep ms] [fail after N records]; main class jobstore.probe.ProbeJob.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
CACHE=${JOBSTORE_FLINK_CACHE:-$REPO_ROOT/.flink}
SRC_DIR=$SCRIPT_DIR/probe-job
JAR=$CACHE/probe-job.jar
MAIN_CLASS=jobstore.probe.ProbeJob

log() { printf '[probe-job] %s\n' "$*" >&2; }

up_to_date() {
  [ -f "$JAR" ] || return 1
  [ -z "$(find "$SRC_DIR" "${BASH_SOURCE[0]}" -newer "$JAR" -print -quit)" ]
}

if up_to_date; then
  printf '%s\n' "$JAR"
  exit 0
fi

if [ -z "${FLINK_HOME:-}" ]; then
  FLINK_HOME=$("$SCRIPT_DIR/install.sh")
fi
[ -d "$FLINK_HOME/lib" ] || { log "FLINK_HOME=$FLINK_HOME has no lib/"; exit 1; }
mkdir -p "$CACHE"

# Serialise concurrent builds.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.probe-job.lock"
  flock 9
  if up_to_date; then
    printf '%s\n' "$JAR"
    exit 0
  fi
fi

work=$(mktemp -d "$CACHE/probe-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/classes"
find "$SRC_DIR/src" -name '*.java' -print >"$work/sources.txt"
log "compiling $(wc -l <"$work/sources.txt") source file(s) against $FLINK_HOME/lib"
javac --release 11 -nowarn -encoding UTF-8 -cp "$FLINK_HOME/lib/*" -d "$work/classes" "@$work/sources.txt" >&2
jar --create --file "$work/probe-job.jar" --main-class "$MAIN_CLASS" -C "$work/classes" . >&2
mv -f "$work/probe-job.jar" "$JAR"
log "built $JAR"
printf '%s\n' "$JAR"
