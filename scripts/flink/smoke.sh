#!/usr/bin/env bash
# End-to-end self-check of the Flink test harness (install.sh, build-probe-job.sh, cluster.sh)
# against a real Flink 2.3.0 session cluster.
#
# Usage: scripts/flink/smoke.sh
# Env:   JOBSTORE_FLINK_CACHE  cache folder (default <repo root>/.flink)
#        SMOKE_KEEP=1          keep the scratch cluster folder (its path is logged)
# Exit 0 only if every check held; the cluster is always stopped (trap on EXIT).
# Last stdout line: "smoke: N passed, 0 failed".
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$SCRIPT_DIR/cluster.sh
# The smoke test defines its cluster and jobs itself.
unset FLINK_EXTRA_CONF FLINK_EXTRA_JARS FLINK_JOB_JAR FLINK_JOB_PARALLELISM FLINK_JOB_SAVEPOINT
PASSED=0
DIR=""
STARTED=0

log() { printf '[smoke] %s\n' "$*" >&2; }
now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }
secs_since() { python3 -c 'import sys, time; print("%.1f" % (time.time() - int(sys.argv[1]) / 1000))' "$1"; }

pass() { PASSED=$((PASSED + 1)); log "ok   $*"; }
fail() {
  log "FAIL $*"
  printf 'smoke: %d passed, 1 failed\n' "$PASSED"
  exit 1
}

cleanup() {
  local rc=$?
  trap - EXIT
  if [ -n "$DIR" ] && [ -d "$DIR" ]; then
    if [ "$rc" -ne 0 ] && [ "$STARTED" -eq 1 ]; then
      local f
      for f in "$DIR"/log/*.log; do
        [ -f "$f" ] || continue
        printf '===== last lines of %s =====\n' "$f" >&2
        tail -n 30 "$f" >&2
      done
    fi
    "$CLUSTER" stop "$DIR" || log "cluster stop failed"
    if [ "${SMOKE_KEEP:-0}" = 1 ]; then
      log "kept $DIR"
    else
      rm -rf "$DIR"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# json FILE EXPR: evaluates a Python expression over the parsed JSON `j` (prints "" on error)
json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    v = eval(sys.argv[2], {"j": j})
except Exception:
    v = ""
print("" if v is None else v)
PY
}

# http METHOD PATH [JSON BODY]: body to $BODY_FILE, prints the status code
http() {
  local args=(-sS --max-time 30 -o "$BODY_FILE" -w '%{http_code}' -X "$1")
  if [ $# -ge 3 ]; then args+=(-H 'Content-Type: application/json' --data "$3"); fi
  curl "${args[@]}" "$URL$2" || echo 000
}

# poll_savepoint JOB TRIGGER: polls until COMPLETED (60 s); sets SAW_IN_PROGRESS, SP_LOCATION
poll_savepoint() {
  local job=$1 trigger=$2 deadline status code
  SAW_IN_PROGRESS=0 SP_LOCATION=""
  deadline=$(( $(date +%s) + 60 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    code=$(http GET "/jobs/$job/savepoints/$trigger")
    [ "$code" = 200 ] || fail "GET savepoint status: HTTP $code $(head -c 500 "$BODY_FILE")"
    status=$(json "$BODY_FILE" 'j["status"]["id"]')
    case $status in
      IN_PROGRESS)
        [ "$(json "$BODY_FILE" '"operation" in j and j["operation"] is None')" = True ] \
          || fail "IN_PROGRESS without \"operation\": null: $(cat "$BODY_FILE")"
        SAW_IN_PROGRESS=1 ;;
      COMPLETED)
        SP_LOCATION=$(json "$BODY_FILE" 'j["operation"].get("location", "")')
        [ -n "$SP_LOCATION" ] || fail "savepoint failed: $(head -c 1500 "$BODY_FILE")"
        return 0 ;;
      *) fail "unexpected savepoint status: $(head -c 500 "$BODY_FILE")" ;;
    esac
    sleep 0.2
  done
  fail "savepoint $trigger not COMPLETED within 60 s"
}

check_location() { # $1 = location reported by Flink (file:/...)
  local path=${1#file:}
  case $1 in file:/*) ;; *) fail "location is not file:/...: $1" ;; esac
  case $path in "$DIR/sp/"*) ;; *) fail "location $1 is not under $DIR/sp" ;; esac
  [ -f "$path/_metadata" ] || fail "no $path/_metadata on disk"
}

T_ALL=$(now_ms)

# 1. install + build
t=$(now_ms)
FLINK_HOME=$("$SCRIPT_DIR/install.sh")
export FLINK_HOME
T_INSTALL=$(secs_since "$t")
[ -x "$FLINK_HOME/bin/start-cluster.sh" ] || fail "install: no start-cluster.sh under $FLINK_HOME"
pass "install: FLINK_HOME=$FLINK_HOME (${T_INSTALL}s)"

t=$(now_ms)
JAR=$("$SCRIPT_DIR/build-probe-job.sh")
T_BUILD=$(secs_since "$t")
[ -f "$JAR" ] || fail "build: no jar at $JAR"
pass "build: $JAR (${T_BUILD}s)"

# 2. cluster without a default savepoint dir
DIR=$(mktemp -d "${TMPDIR:-/tmp}/jobstore-flink-smoke.XXXXXX")
BODY_FILE=$DIR/smoke-body.json
log "cluster folder: $DIR"
t=$(now_ms)
STARTED=1
URL=$(FLINK_EXTRA_CONF="" FLINK_EXTRA_JARS="" "$CLUSTER" start "$DIR")
T_START=$(secs_since "$t")
[ "$URL" = "$(cat "$DIR/rest-url")" ] || fail "start: stdout $URL differs from rest-url file"
pass "cluster start: $URL (${T_START}s)"

# 3. unbounded job with a slow snapshot
JOB=$("$CLUSTER" submit "$DIR" 0 20 smoke-unbounded 2000)
[[ $JOB =~ ^[0-9a-f]{32}$ ]] || fail "submit printed no job id: $JOB"
"$CLUSTER" wait-job "$DIR" "$JOB" RUNNING 90 >/dev/null || fail "job $JOB not RUNNING"
pass "unbounded job $JOB RUNNING"

code=$(http POST "/jobs/$JOB/savepoints" '{}')
if [ "$code" != 400 ] || ! grep -q 'execution.checkpointing.savepoint-dir\] is not set' "$BODY_FILE"; then
  fail "savepoint without target dir: expected 400 not set, got $code $(head -c 300 "$BODY_FILE")"
fi
pass "savepoint without target-directory and no default: 400"

# 4. savepoint with target directory and client triggerId
TRIGGER=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
t=$(now_ms)
code=$(http POST "/jobs/$JOB/savepoints" \
  "{\"target-directory\":\"file://$DIR/sp\",\"triggerId\":\"$TRIGGER\"}")
[ "$code" = 202 ] || fail "trigger savepoint: HTTP $code $(head -c 500 "$BODY_FILE")"
[ "$(json "$BODY_FILE" 'j["request-id"]')" = "$TRIGGER" ] || fail "request-id is not our triggerId"
poll_savepoint "$JOB" "$TRIGGER"
T_SP=$(secs_since "$t")
[ "$SAW_IN_PROGRESS" = 1 ] || fail "savepoint was never observed IN_PROGRESS"
check_location "$SP_LOCATION"
pass "savepoint IN_PROGRESS then COMPLETED at $SP_LOCATION (${T_SP}s), _metadata on disk"

# 5. stop-with-savepoint
TRIGGER2=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
code=$(http POST "/jobs/$JOB/stop" \
  "{\"targetDirectory\":\"file://$DIR/sp\",\"drain\":false,\"triggerId\":\"$TRIGGER2\"}")
[ "$code" = 202 ] || fail "stop-with-savepoint: HTTP $code $(head -c 500 "$BODY_FILE")"
poll_savepoint "$JOB" "$TRIGGER2"
check_location "$SP_LOCATION"
"$CLUSTER" wait-job "$DIR" "$JOB" FINISHED 60 >/dev/null || fail "job $JOB not FINISHED after stop"
pass "stop-with-savepoint COMPLETED at $SP_LOCATION, job FINISHED"

# 6. bounded job finishes, failing job fails
BJOB=$("$CLUSTER" submit "$DIR" 20 50 smoke-bounded)
"$CLUSTER" wait-job "$DIR" "$BJOB" FINISHED 90 >/dev/null || fail "bounded job $BJOB not FINISHED"
pass "bounded job $BJOB FINISHED"

FJOB=$("$CLUSTER" submit "$DIR" 0 50 smoke-failing 0 10)
"$CLUSTER" wait-job "$DIR" "$FJOB" FAILED 90 >/dev/null || fail "failing job $FJOB not FAILED"
code=$(http GET "/jobs/$FJOB/exceptions")
grep -q 'intentional failure after 10 records' "$BODY_FILE" || fail "failure cause not the probe's"
pass "failing job $FJOB FAILED (no restart)"

# 7. memory of the cluster
RSS_KB=0
PIDS=$(cat "$DIR"/pid/*.pid)
for p in $PIDS; do
  kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
  log "pid $p VmRSS ${kb} kB"
  RSS_KB=$((RSS_KB + ${kb:-0}))
done
log "cluster resident memory: $((RSS_KB / 1024)) MB (JobManager + TaskManager)"

t=$(now_ms)
"$CLUSTER" stop "$DIR"
T_STOP=$(secs_since "$t")
for p in $PIDS; do
  kill -0 "$p" 2>/dev/null && fail "pid $p still alive after stop"
done
[ ! -f "$DIR/rest-url" ] || fail "rest-url still there after stop"
pass "cluster stop (${T_STOP}s)"

log "timings: install ${T_INSTALL}s, build ${T_BUILD}s, start ${T_START}s, savepoint ${T_SP}s, stop ${T_STOP}s, total $(secs_since "$T_ALL")s; RSS $((RSS_KB / 1024)) MB"
printf 'smoke: %d passed, 0 failed\n' "$PASSED"
