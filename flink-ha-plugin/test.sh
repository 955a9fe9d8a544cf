#!/usr/bin/env bash
# Integration suite of the jobstore HA plugin on a real Apache Flink 2.3.0 and a real jobstore
# on PostgreSQL. Run by CI; takes 2.5-3.5 minutes once Flink and jobstore are built.
#
# Usage: flink-ha-plugin/test.sh
# Env:   FLINK_HOME      Flink 2.3 (default: scripts/flink/install.sh, which installs it)
#        JOBSTORE_BIN    jobstore binary (default: cargo build --release --bin jobstore)
#        PGHOST PGPORT PGUSER  PostgreSQL server (default 127.0.0.1, 5432, postgres; trust auth)
#        KEEP_SCRATCH=1  keep the scratch folder (logs) after the run
# Needs: java/javac 11+, python3, curl, psql, cargo (unless JOBSTORE_BIN).
#
# What it shows (each check prints "ok"/"not ok"; the last line is "N passed, M failed"):
#   0. self-test of the plugin classes: Flink's JobResultStore contract cases against a fake
#      (with fault injection: retries, 409/404 mapping, lost answers, paging, auth) and then
#      against the real jobstore. jobstore runs with bearer tokens: Flink cluster A gets its
#      write token (limited to A's cluster id) from jobstore.token, cluster B its own from
#      jobstore.token-file; A's token is refused on B's entries (403).
#   1. a bounded job: its job entry and its application entry are dirty (observed while the
#      proxy holds Flink's mark-clean), then clean; the stored result equals Flink's
#      /jobs/<id>/execution-result, the application entry matches /applications/<id>.
#   2. a failing job: the entry carries FAILED and Flink's failure-cause.
#   3. recovery: jobstore is stopped while Flink's mark-clean of a finished job is in flight, so
#      the entries stay dirty; jobstore comes back, the JobManager is restarted: it starts
#      without a fatal error, finds the dirty entries through getDirtyResults and cleans them.
#   4. two Flink clusters with different cluster ids on one jobstore: neither sees the other's
#      entries (B starts while A has dirty entries and finds none; B runs a job with A's job id).
#
# Flink talks to jobstore through a small proxy (FaultProxy) that forwards everything and can
# hold mark-clean requests: that is how the dirty state is observed and how jobstore is stopped
# exactly between Flink's create and its mark-clean.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/.." && pwd)
CLUSTER_SH=$REPO_ROOT/scripts/flink/cluster.sh
LIB=$HERE/test/lib.py
START_TS=$(date +%s)

PASSED=0
FAILED=0
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/jobstore-plugin-test.XXXXXX")
PGHOST=${PGHOST:-127.0.0.1}
PGPORT=${PGPORT:-5432}
PGUSER=${PGUSER:-postgres}
export PGHOST PGPORT PGUSER
DB=jobstore_plugin_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
DB_CREATED=
JOBSTORE_PID=
PROXY_PID=
CLUSTERS=()
RUN=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
CLUSTER_A=plugin-a-$RUN
CLUSTER_B=plugin-b-$RUN

log() { printf '[plugin-test %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
ok() { PASSED=$((PASSED + 1)); printf 'ok - %s\n' "$*"; }
not_ok() { FAILED=$((FAILED + 1)); printf 'not ok - %s\n' "$*"; }

# check NAME CMD...: runs CMD, "ok" when it exits 0 (its stdout is appended to the line).
check() {
  local name=$1 out rc
  shift
  out=$("$@" 2>"$SCRATCH/check.err")
  rc=$?
  if [ $rc -eq 0 ]; then
    ok "$name${out:+ ($(printf '%s' "$out" | tr '\n' ' ' | sed 's/ *$//'))}"
  else
    not_ok "$name: $(tr '\n' ' ' <"$SCRATCH/check.err" | cut -c1-600) ${out:+[$out]}"
  fi
  return $rc
}

# abort MESSAGE: a step the rest depends on failed.
abort() {
  not_ok "$*"
  exit 1
}

show_logs() {
  local f
  for f in "$SCRATCH"/jobstore.log "$SCRATCH"/proxy.log "$SCRATCH"/cluster-*.log \
    "$SCRATCH"/flink-*/log/*standalonesession*.log; do
    [ -f "$f" ] || continue
    printf '===== last lines of %s =====\n' "$f" >&2
    grep -v '^\s*at ' "$f" | tail -n 25 >&2
  done
}

cleanup() {
  local rc=$? c
  trap - EXIT INT TERM
  [ "$rc" -ne 0 ] && [ "$FAILED" -eq 0 ] && not_ok "suite aborted (exit $rc)"
  [ "$FAILED" -gt 0 ] && show_logs
  for c in "${CLUSTERS[@]}"; do
    "$CLUSTER_SH" stop "$c" >>"$SCRATCH/cluster-stop.log" 2>&1 || log "could not stop Flink in $c"
  done
  stop_proxy
  stop_jobstore
  if [ -n "$DB_CREATED" ]; then
    psql -d postgres -v ON_ERROR_STOP=1 -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 \
      || log "could not drop database $DB"
  fi
  if [ -n "${KEEP_SCRATCH:-}" ]; then
    log "scratch folder kept: $SCRATCH"
  else
    rm -rf "$SCRATCH"
  fi
  log "took $(( $(date +%s) - START_TS ))s"
  printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
  [ "$FAILED" -eq 0 ] || exit 1
  exit 0
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_http_200() { # URL TIMEOUT_S
  local deadline=$(( $(date +%s) + $2 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(python3 "$LIB" status "$1")" = 200 ] && return 0
    sleep 0.3
  done
  return 1
}

start_jobstore() { # on $JOBSTORE_PORT, database $DB, tokens $SCRATCH/tokens
  "$JOBSTORE_BIN" serve --database-url "postgres://$PGUSER@$PGHOST:$PGPORT/$DB" \
    --listen "127.0.0.1:$JOBSTORE_PORT" --tokens-file "$SCRATCH/tokens" >>"$SCRATCH/jobstore.log" 2>&1 &
  JOBSTORE_PID=$!
  local deadline=$(( $(date +%s) + 60 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(python3 "$LIB" status "$JOBSTORE/readyz")" = 200 ] && return 0
    kill -0 "$JOBSTORE_PID" 2>/dev/null || { tail -n 20 "$SCRATCH/jobstore.log" >&2; return 1; }
    sleep 0.3
  done
  return 1
}

stop_jobstore() {
  [ -n "$JOBSTORE_PID" ] || return 0
  if kill -0 "$JOBSTORE_PID" 2>/dev/null; then
    kill -TERM "$JOBSTORE_PID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$JOBSTORE_PID" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$JOBSTORE_PID" 2>/dev/null && kill -KILL "$JOBSTORE_PID" 2>/dev/null
  fi
  wait "$JOBSTORE_PID" 2>/dev/null
  JOBSTORE_PID=
}

stop_proxy() {
  [ -n "$PROXY_PID" ] || return 0
  kill -TERM "$PROXY_PID" 2>/dev/null
  wait "$PROXY_PID" 2>/dev/null
  PROXY_PID=
}

start_flink() { # NAME CLUSTER_ID JOBSTORE_URL TOKEN_LINE; prints the REST URL
  # (runs in a command substitution: the caller registers $SCRATCH/flink-NAME in CLUSTERS)
  local dir=$SCRATCH/flink-$1
  FLINK_EXTRA_JARS=$PLUGIN_JAR FLINK_EXTRA_CONF="high-availability.type: io.jobstore.flink.ha.JobstoreHaServicesFactory
high-availability.cluster-id: $2
jobstore.url: $3
$4
jobstore.timeout: 5s
jobstore.retries: 2
jobstore.retry-backoff: 200ms" FLINK_HOME=$FLINK_HOME "$CLUSTER_SH" start "$dir" 2>>"$SCRATCH/cluster-$1.log"
}

jm_log() { ls -t "$SCRATCH/flink-$1"/log/*standalonesession*.log 2>/dev/null | head -n 1; }

grep_log() { # FILE PATTERN: prints the first matching line, exit 1 if none
  grep -m1 -F -- "$2" "$1" | sed 's/^.*\] - //' | cut -c1-200
  [ "${PIPESTATUS[0]}" -eq 0 ]
}

wait_log() { # FILE PATTERN TIMEOUT_S
  local deadline=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    grep -qF -- "$2" "$1" 2>/dev/null && { grep_log "$1" "$2"; return 0; }
    sleep 0.5
  done
  echo "no '$2' in $1 within $3 s" >&2
  return 1
}

no_fatal() { # FILE
  if grep -E 'Fatal error occurred|FATAL|Shutting StandaloneSessionClusterEntrypoint down with application status FAILED' "$1" >&2; then
    return 1
  fi
  echo "no fatal error in $(basename "$1")"
}

held_clean() { # wait until the proxy holds at least one mark-clean request
  local deadline=$(( $(date +%s) + 60 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(python3 "$LIB" held "$PROXY" 2>/dev/null)" -ge 1 ] 2>/dev/null && return 0
    sleep 0.2
  done
  echo "Flink did not try to mark a result clean within 60 s" >&2
  return 1
}

same_field() { # URL FIELD EXPECTED
  local v
  v=$(python3 "$LIB" field "$1" "$2")
  [ "$v" = "$3" ] || { echo "$2 is '$v', expected '$3'" >&2; return 1; }
  echo "$2=$v"
}

# ------------------------------------------------------------------------------------------
log "scratch folder $SCRATCH"
for tool in java javac jar python3 curl psql; do
  command -v "$tool" >/dev/null 2>&1 || abort "prerequisite: $tool not on PATH"
done

# Flink and the plugin ---------------------------------------------------------------------
if [ -z "${FLINK_HOME:-}" ]; then
  FLINK_HOME=$("$REPO_ROOT/scripts/flink/install.sh") || abort "scripts/flink/install.sh failed"
fi
export FLINK_HOME
PLUGIN_JAR=$("$HERE/build.sh" 2>"$SCRATCH/build.log") || { cat "$SCRATCH/build.log" >&2; abort "build.sh failed"; }
ok "build.sh built $(basename "$PLUGIN_JAR") with javac against $(basename "$(ls "$FLINK_HOME"/lib/flink-dist*.jar)")"
PROBE_JAR=$(FLINK_HOME=$FLINK_HOME "$REPO_ROOT/scripts/flink/build-probe-job.sh" 2>>"$SCRATCH/build.log") \
  || abort "scripts/flink/build-probe-job.sh failed"

mkdir -p "$SCRATCH/test-classes"
javac --release 11 -nowarn -encoding UTF-8 -cp "$FLINK_HOME/lib/*:$PLUGIN_JAR" -d "$SCRATCH/test-classes" \
  $(find "$HERE/src/test/java" -name '*.java') 2>>"$SCRATCH/build.log" \
  || { cat "$SCRATCH/build.log" >&2; abort "compiling the test classes failed"; }
TEST_CP="$SCRATCH/test-classes:$PLUGIN_JAR:$FLINK_HOME/lib/*"
JAVA_LOG=(-Dlog4j.configurationFile="$FLINK_HOME/conf/log4j-console.properties" -Dlog.file="$SCRATCH/selftest.log")

self_test() { # LABEL ARGS...: runs PluginSelfTest ARGS; each of its cases is one check
  local label=$1 out p f
  shift
  out=$(cd "$SCRATCH" && java "${JAVA_LOG[@]}" -cp "$TEST_CP" io.jobstore.flink.ha.PluginSelfTest "$@" \
    2>"$SCRATCH/selftest.err")
  printf '%s\n' "$out" | sed -n -e "s/^ok - /ok - $label: /p" -e "s/^not ok - /not ok - $label: /p"
  p=$(printf '%s\n' "$out" | grep -c '^ok - ')
  f=$(printf '%s\n' "$out" | grep -c '^not ok - ')
  PASSED=$((PASSED + p))
  FAILED=$((FAILED + f))
  if [ "$f" -gt 0 ] || ! printf '%s\n' "$out" | grep -q '^[0-9]* passed, 0 failed$'; then
    [ "$f" -eq 0 ] && not_ok "$label: the self-test did not complete"
    printf '%s\n' "$out" | grep -v '^ok - ' | head -80 >&2
    tail -20 "$SCRATCH/selftest.err" >&2
  fi
}
log "plugin self-test against a fake jobstore"
self_test "self-test, fake jobstore" --fake "$HERE/src/test/resources/flink-2.3-files"

# jobstore on a fresh PostgreSQL database --------------------------------------------------
if [ -z "${JOBSTORE_BIN:-}" ]; then
  command -v cargo >/dev/null 2>&1 || abort "prerequisite: cargo (or set JOBSTORE_BIN)"
  log "cargo build --release --bin jobstore"
  (cd "$REPO_ROOT" && cargo build --release --bin jobstore) >"$SCRATCH/cargo.log" 2>&1 \
    || { tail -30 "$SCRATCH/cargo.log" >&2; abort "cargo build --release --bin jobstore failed"; }
  JOBSTORE_BIN=$REPO_ROOT/target/release/jobstore
fi
[ -x "$JOBSTORE_BIN" ] || abort "no jobstore binary at $JOBSTORE_BIN"

psql -d postgres -v ON_ERROR_STOP=1 -qc "CREATE DATABASE $DB" >"$SCRATCH/psql.log" 2>&1 \
  || { cat "$SCRATCH/psql.log" >&2; abort "CREATE DATABASE $DB on $PGHOST:$PGPORT"; }
DB_CREATED=1
# Auth on: each Flink cluster gets a write token limited to its cluster id (A's in
# jobstore.token, B's in jobstore.token-file); the self-test writes with a write token for
# every cluster; the checks below read with a read token.
WRITE_TOKEN=w$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
READ_TOKEN=r$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
TOKEN_A=a$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
TOKEN_B=b$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
(umask 077 && printf 'write %s\nread %s\nwrite %s %s\nwrite %s %s\n' "$WRITE_TOKEN" "$READ_TOKEN" \
  "$CLUSTER_A" "$TOKEN_A" "$CLUSTER_B" "$TOKEN_B" >"$SCRATCH/tokens" \
  && printf '%s\n' "$TOKEN_B" >"$SCRATCH/flink-token")
export JOBSTORE_TOKEN=$READ_TOKEN
JOBSTORE_PORT=$(free_port)
JOBSTORE=http://127.0.0.1:$JOBSTORE_PORT
start_jobstore || abort "jobstore did not become ready at $JOBSTORE/readyz"
ok "jobstore serving at $JOBSTORE on PostgreSQL database $DB (pid $JOBSTORE_PID), bearer tokens on"
check "jobstore refuses a request without a token" sh -c "test \"\$(curl -s -o /dev/null -w '%{http_code}' '$JOBSTORE/v1/clusters/x/job-results')\" = 401 && echo 401"

log "plugin self-test against the real jobstore"
self_test "self-test, jobstore on PostgreSQL" --url "$JOBSTORE" --token "$WRITE_TOKEN" --read-token "$READ_TOKEN"

PROXY_PORT=$(free_port)
PROXY=http://127.0.0.1:$PROXY_PORT
java -cp "$TEST_CP" io.jobstore.flink.ha.FaultProxy "$PROXY_PORT" "$JOBSTORE" >"$SCRATCH/proxy.log" 2>&1 &
PROXY_PID=$!
wait_http_200 "$PROXY/__proxy/held" 20 || abort "FaultProxy did not start"

# Flink cluster A ----------------------------------------------------------------------------
log "starting Flink cluster A (cluster id $CLUSTER_A)"
CLUSTERS+=("$SCRATCH/flink-A")
FLINK_A=$(start_flink A "$CLUSTER_A" "$PROXY" "jobstore.token: $TOKEN_A") || abort "Flink cluster A did not start (see $SCRATCH/cluster-A.log)"
ok "Flink 2.3.0 cluster A started with high-availability.type io.jobstore.flink.ha.JobstoreHaServicesFactory at $FLINK_A, token in jobstore.token"
JM_A=$(jm_log A)
TM_A=$(ls "$SCRATCH"/flink-A/log/*taskexecutor*.log | head -n 1)
check "factory instantiated in the JobManager" grep_log "$JM_A" "Using jobstore at $PROXY for job and application results of cluster '$CLUSTER_A'"
check "factory instantiated in the TaskManager" grep_log "$TM_A" "Using jobstore at $PROXY for job and application results of cluster '$CLUSTER_A'"
check "JobManager start called getDirtyResults (job results)" grep_log "$JM_A" "Found 0 dirty job result(s) in jobstore (cluster $CLUSTER_A)"
check "JobManager start called getDirtyResults (application results)" grep_log "$JM_A" "Found 0 dirty application result(s) in jobstore (cluster $CLUSTER_A)"

JR_A=$JOBSTORE/v1/clusters/$CLUSTER_A/job-results
AR_A=$JOBSTORE/v1/clusters/$CLUSTER_A/application-results
JR_B=$JOBSTORE/v1/clusters/$CLUSTER_B/job-results
AR_B=$JOBSTORE/v1/clusters/$CLUSTER_B/application-results

submit() { # DIR ARGS...: prints the job id
  local dir=$1
  shift
  FLINK_HOME=$FLINK_HOME "$CLUSTER_SH" submit "$dir" "$@" 2>>"$SCRATCH/cluster-submit.log"
}

# (1) a bounded job --------------------------------------------------------------------------
log "(1) bounded job"
curl -sf -X POST "$PROXY/__proxy/hold-clean" >/dev/null || abort "proxy hold-clean"
J1=$(submit "$SCRATCH/flink-A" 200 100 probe-bounded) || abort "(1) submitting the bounded job"
check "(1) Flink tried to mark job $J1 clean (request held by the proxy)" held_clean
check "(1) job entry is dirty while Flink's mark-clean is held" python3 "$LIB" wait-state "$JR_A/$J1" dirty 10
check "(1) application entry is dirty while Flink's mark-clean is held" python3 "$LIB" wait-state "$AR_A/$J1" dirty 10
curl -sf -X POST "$PROXY/__proxy/release" >/dev/null || abort "proxy release"
check "(1) Flink reports the job FINISHED" env FLINK_HOME="$FLINK_HOME" "$CLUSTER_SH" wait-job "$SCRATCH/flink-A" "$J1" FINISHED 60
check "(1) job entry is then clean" python3 "$LIB" wait-state "$JR_A/$J1" clean 30
check "(1) application entry is then clean" python3 "$LIB" wait-state "$AR_A/$J1" clean 30
check "(1) stored job result equals Flink's /jobs/$J1/execution-result" python3 "$LIB" compare-job "$JR_A/$J1" "$FLINK_A" "$J1"
check "(1) stored application result matches Flink's /applications/$J1" python3 "$LIB" compare-app "$AR_A/$J1" "$FLINK_A" "$J1"
check "(1) application entry is FINISHED" same_field "$AR_A/$J1" result.application-state FINISHED

# (2) a failing job --------------------------------------------------------------------------
log "(2) failing job"
J2=$(submit "$SCRATCH/flink-A" 100000 100 probe-failing 0 50) || abort "(2) submitting the failing job"
check "(2) Flink reports the job FAILED" env FLINK_HOME="$FLINK_HOME" "$CLUSTER_SH" wait-job "$SCRATCH/flink-A" "$J2" FAILED 60
check "(2) job entry ends clean" python3 "$LIB" wait-state "$JR_A/$J2" clean 30
check "(2) stored entry carries FAILED and Flink's failure-cause" python3 "$LIB" compare-failure "$JR_A/$J2" "$FLINK_A" "$J2" "intentional failure after 50 records"
check "(2) stored job result equals Flink's /jobs/$J2/execution-result" python3 "$LIB" compare-job "$JR_A/$J2" "$FLINK_A" "$J2"
check "(2) application entry ends clean with state FAILED" sh -c "python3 '$LIB' wait-state '$AR_A/$J2' clean 30 && python3 '$LIB' field '$AR_A/$J2' result.application-state | grep -x FAILED"

# (3) recovery -------------------------------------------------------------------------------
log "(3) recovery after jobstore was down when Flink marked the result clean"
curl -sf -X POST "$PROXY/__proxy/hold-clean" >/dev/null || abort "proxy hold-clean"
J3=$(submit "$SCRATCH/flink-A" 200 100 probe-recovered) || abort "(3) submitting the job"
check "(3) Flink tried to mark job $J3 clean (request held)" held_clean
check "(3) job entry is dirty" python3 "$LIB" wait-state "$JR_A/$J3" dirty 10
check "(3) application entry is dirty" python3 "$LIB" wait-state "$AR_A/$J3" dirty 10
log "(3) stopping jobstore (pid $JOBSTORE_PID), then letting Flink's mark-clean through"
stop_jobstore
curl -sf -X POST "$PROXY/__proxy/release" >/dev/null || abort "proxy release"
check "(3) Flink could not mark the result clean (jobstore stopped) and logged it" \
  wait_log "$JM_A" "Could not properly mark job $J3 result as clean" 60
check "(3) the JobManager survived the failed mark-clean" sh -c "curl -sf '$FLINK_A/overview' >/dev/null && echo 'REST answers'"
start_jobstore || abort "(3) jobstore did not come back"
ok "(3) jobstore back on the same database (pid $JOBSTORE_PID)"
check "(3) job entry is still dirty in jobstore" same_field "$JR_A/$J3" state dirty
check "(3) application entry is still dirty in jobstore" same_field "$AR_A/$J3" state dirty

# (4, first half) cluster B starts while A has dirty entries -----------------------------------
log "(4) starting Flink cluster B (cluster id $CLUSTER_B) on the same jobstore while A has dirty entries"
CLUSTERS+=("$SCRATCH/flink-B")
FLINK_B=$(start_flink B "$CLUSTER_B" "$JOBSTORE" "jobstore.token-file: $SCRATCH/flink-token") || abort "Flink cluster B did not start"
ok "(4) Flink cluster B started at $FLINK_B, talking to jobstore directly, token from jobstore.token-file"
JM_B=$(jm_log B)
check "(4) B's JobManager finds none of A's dirty job results" grep_log "$JM_B" "Found 0 dirty job result(s) in jobstore (cluster $CLUSTER_B)"
check "(4) B's JobManager finds none of A's dirty application results" grep_log "$JM_B" "Found 0 dirty application result(s) in jobstore (cluster $CLUSTER_B)"

log "(3) restarting A's JobManager"
FLINK_HOME=$FLINK_HOME "$CLUSTER_SH" restart-jm "$SCRATCH/flink-A" >/dev/null 2>>"$SCRATCH/cluster-A.log" \
  || abort "(3) restart of A's JobManager failed"
ok "(3) A's JobManager restarted and the TaskManager re-registered"
JM_A=$(jm_log A)
check "(3) the new JobManager found the dirty job result through getDirtyResults" \
  wait_log "$JM_A" "Found 1 dirty job result(s) in jobstore (cluster $CLUSTER_A)" 30
check "(3) ... and the dirty application result" \
  wait_log "$JM_A" "Found 1 dirty application result(s) in jobstore (cluster $CLUSTER_A)" 30
check "(3) job entry ends clean" python3 "$LIB" wait-state "$JR_A/$J3" clean 60
check "(3) application entry ends clean" python3 "$LIB" wait-state "$AR_A/$J3" clean 60
check "(3) the recovered entry kept Flink's result" same_field "$JR_A/$J3" result.name probe-recovered
check "(3) no fatal error in the new JobManager" no_fatal "$JM_A"
check "(3) the JobManager is up after the recovery" sh -c "curl -sf '$FLINK_A/overview' | grep -q '\"taskmanagers\":1' && echo 'REST /overview: 1 TaskManager'"

# (4, second half) B runs a job with A's job id ------------------------------------------------
log "(4) cluster B runs a job with the id of A's job $J1"
check "(4) B does not see A's entries: B accepts a job with A's job id $J1" \
  python3 "$LIB" run-with-id "$FLINK_B" "$PROBE_JAR" "$J1" 100 100 probe-b-same-id
check "(4) B's job with A's job id finishes" env FLINK_HOME="$FLINK_HOME" "$CLUSTER_SH" wait-job "$SCRATCH/flink-B" "$J1" FINISHED 60
check "(4) B's entry for $J1 ends clean under cluster $CLUSTER_B" python3 "$LIB" wait-state "$JR_B/$J1" clean 30
check "(4) B's entry is B's job" same_field "$JR_B/$J1" result.name probe-b-same-id
check "(4) A's entry for $J1 is still A's job" same_field "$JR_A/$J1" result.name probe-bounded
check "(4) A's job results are exactly A's three jobs" sh -c "test \"\$(python3 '$LIB' ids '$JR_A?state=all' job-results job-id)\" = \"$(printf '%s\n' "$J1" "$J2" "$J3" | sort | tr '\n' ' ' | sed 's/ $//')\" && echo '3 entries'"
check "(4) B's job results are exactly B's one job" sh -c "test \"\$(python3 '$LIB' ids '$JR_B?state=all' job-results job-id)\" = '$J1' && echo '1 entry'"
check "(4) B's application results are exactly B's one application" sh -c "test \"\$(python3 '$LIB' ids '$AR_B?state=all' application-results application-id)\" = '$J1' && echo '1 entry'"
check "(4) control: A (restarted, so only jobstore remembers $J1) refuses a job with that id" \
  sh -c "out=\$(python3 '$LIB' run-with-id '$FLINK_A' '$PROBE_JAR' '$J1' 100 100 probe-a-again); rc=\$?; echo \"\$out\"; test \$rc -eq 3"
check "(4) A's token (write $CLUSTER_A) is refused on B's entries: 403" \
  sh -c "test \"\$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOKEN_A' '$JR_B?state=all')\" = 403 && echo 403"

exit 0
