#!/usr/bin/env bash
# Proves jobstore's savepoint operations against a REAL Apache Flink 2.3.0 session cluster:
# jobstore (`serve --flink-rest-url ... --savepoint-dir ...`) drives savepoints and
# stop-with-savepoint on Flink with its own request-id as Flink's triggerId, stores Flink's
# location or failure-cause verbatim, and keeps answering after a jobstore restart and after
# Flink forgot the operation (JobManager restart). Runs every check on PostgreSQL and on
# SQLite, against one Flink cluster.
#
# Usage: scripts/test-savepoints-real-flink.sh
# Env:   JOBSTORE_BIN          jobstore binary (default target/debug/jobstore, built with
#                              `cargo build --bin jobstore` when missing)
#        JOBSTORE_FLINK_CACHE  Flink install / probe-job cache (see scripts/flink/install.sh)
#        PG_HOST PG_PORT PG_USER  PostgreSQL admin connection (default 127.0.0.1 5432 postgres;
#                              trust auth); a database jobstore_flink_<random> is created and
#                              dropped
#        KEEP_TMP=1            keep the scratch folder (logs, savepoints); its path is logged
# Stdout: one "PASS <check>" / "FAIL <check>: <why>" line per check, last line
# "N passed, M failed". Exit status 0 only if every check passed.
# Flink (scripts/flink/cluster.sh stop) and jobstore (SIGTERM to the recorded pid) are always
# stopped and the database dropped, by a trap on EXIT/INT/TERM.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
CLUSTER=$SCRIPT_DIR/flink/cluster.sh

# This suite defines the Flink cluster and the jobs itself (no default savepoint dir!), and
# passes every jobstore flag explicitly: an inherited JOBSTORE_<FLAG> (clap reads them) must
# not change what is tested.
unset FLINK_EXTRA_CONF FLINK_EXTRA_JARS FLINK_JOB_PARALLELISM FLINK_JOB_SAVEPOINT
while IFS= read -r var; do
  case $var in
    JOBSTORE_BIN | JOBSTORE_FLINK_CACHE | JOBSTORE_LOG) ;;
    JOBSTORE_*) unset "$var" ;;
  esac
done < <(compgen -e)

PG_HOST=${PG_HOST:-127.0.0.1}
PG_PORT=${PG_PORT:-5432}
PG_USER=${PG_USER:-postgres}

PASSED=0
FAILED=0
REASON=""
TMP=""
FLINK_DIR=""
FLINK_STARTED=0
FLINK_URL=""
DB_NAME=""
JS_PID=""
JS_URL=""
JS_RC=""
T_START=$(date +%s)

log() { printf '[sp-real-flink] %s\n' "$*" >&2; }

# --- results ---------------------------------------------------------------------------------

pass() { PASSED=$((PASSED + 1)); printf 'PASS %s\n' "$1"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL %s: %s\n' "$1" "$2"; }

# check NAME FUNC ARGS...: runs FUNC; it returns non-zero with REASON set when the check fails
check() {
  local name=$1 t0
  shift
  REASON=""
  t0=$(date +%s)
  if "$@"; then
    pass "$name"
  else
    fail "$name" "${REASON:-no reason recorded}"
  fi
  log "($(($(date +%s) - t0))s) $name"
}

# A setup step failed: nothing after it can run.
die() {
  log "ERROR: $*"
  fail "setup" "$*"
  exit 1
}

# --- cleanup ---------------------------------------------------------------------------------

psql_admin() { # psql_admin SQL
  psql -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres -v ON_ERROR_STOP=1 -qAt -c "$1"
}

cleanup() {
  local rc=$? f
  trap - EXIT INT TERM
  stop_jobstore
  if [ "$FLINK_STARTED" = 1 ]; then
    "$CLUSTER" stop "$FLINK_DIR" >/dev/null || log "cluster.sh stop failed"
  fi
  if [ -n "$DB_NAME" ]; then
    psql_admin "DROP DATABASE IF EXISTS $DB_NAME WITH (FORCE)" \
      || log "could not drop database $DB_NAME"
  fi
  if [ "$rc" -ne 0 ] && [ "$FAILED" -eq 0 ]; then
    fail "script" "aborted with exit status $rc"
  fi
  if [ "$FAILED" -gt 0 ] && [ -n "$TMP" ]; then
    for f in "$TMP"/jobstore-*.log; do
      [ -f "$f" ] || continue
      printf '===== last lines of %s =====\n' "$f" >&2
      tail -n 40 "$f" >&2
    done
  fi
  if [ -n "$TMP" ] && [ -d "$TMP" ]; then
    if [ "${KEEP_TMP:-0}" = 1 ]; then
      log "kept $TMP"
    else
      rm -rf "$TMP"
    fi
  fi
  log "total run time $(($(date +%s) - T_START))s"
  printf '%d passed, %d failed\n' "$PASSED" "$FAILED"
  if [ "$FAILED" -gt 0 ] && [ "$rc" -eq 0 ]; then rc=1; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- helpers ---------------------------------------------------------------------------------

# jpy FILE EXPR: the Python expression EXPR over the JSON `j` read from FILE; dicts and lists
# as JSON, booleans as true/false, "" for None or on any error
jpy() {
  python3 - "$1" "$2" <<'PY'
import json, sys
try:
    with open(sys.argv[1]) as f:
        j = json.load(f)
    v = eval(sys.argv[2], {"j": j})
except Exception:
    v = None
if v is None:
    print("")
elif isinstance(v, bool):
    print("true" if v else "false")
elif isinstance(v, (dict, list)):
    print(json.dumps(v, sort_keys=True))
else:
    print(v)
PY
}

# json_equal FILE_A EXPR_A FILE_B EXPR_B: the two values are equal JSON (and not None)
json_equal() {
  python3 - "$@" <<'PY'
import json, sys
def val(path, expr):
    with open(path) as f:
        return eval(expr, {"j": json.load(f)})
try:
    a, b = val(sys.argv[1], sys.argv[2]), val(sys.argv[3], sys.argv[4])
except Exception:
    sys.exit(1)
sys.exit(0 if a is not None and a == b else 1)
PY
}

snippet() { head -c "${2:-400}" "$1" 2>/dev/null | tr '\n\t' '  '; }

# http OUT METHOD URL [JSON BODY]: the answer's body to OUT; prints the status (000: none)
http() {
  local out=$1 method=$2 url=$3
  local args=(-sS --max-time 20 -o "$out" -w '%{http_code}' -X "$method")
  if [ $# -ge 4 ]; then args+=(-H 'Content-Type: application/json' --data-binary "$4"); fi
  : >"$out"
  curl "${args[@]}" "$url" 2>>"$TMP/curl.err" || true
}

free_port() {
  python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

random_hex() { python3 -c 'import secrets, sys; print(secrets.token_hex(int(sys.argv[1])))' "$1"; }

alive() { # alive PID: running and not a zombie waiting to be reaped
  local state
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# --- jobstore --------------------------------------------------------------------------------

# start_jobstore DATABASE_URL LOG: serve on a free 127.0.0.1 port until /readyz answers 200;
# sets JS_PID and JS_URL
start_jobstore() {
  local db=$1 logf=$2 attempt port deadline code
  for attempt in 1 2 3; do
    port=$(free_port)
    JS_URL=http://127.0.0.1:$port
    printf '=== %s: serve on %s (attempt %s)\n' "$(date -u +%FT%TZ)" "$JS_URL" "$attempt" >>"$logf"
    "$JOBSTORE_BIN" serve --database-url "$db" --listen "127.0.0.1:$port" \
      --cluster-id default --flink-rest-url "$FLINK_URL" --savepoint-dir "file://$TMP/sp" \
      --poll-interval 200ms >>"$logf" 2>&1 &
    JS_PID=$!
    deadline=$(($(date +%s) + 60))
    while [ "$(date +%s)" -lt "$deadline" ] && alive "$JS_PID"; do
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$JS_URL/readyz" || true)
      if [ "$code" = 200 ]; then
        log "jobstore (pid $JS_PID) ready at $JS_URL"
        return 0
      fi
      sleep 0.2
    done
    if alive "$JS_PID"; then
      log "jobstore not ready within 60s"
      stop_jobstore
      return 1
    fi
    JS_RC=0
    wait "$JS_PID" || JS_RC=$?
    JS_PID=""
    log "jobstore exited with status $JS_RC during start"
    grep -q 'cannot listen' "$logf" || return 1
  done
  return 1
}

# stop_jobstore: SIGTERM to the recorded pid, wait (SIGKILL after 15 s); JS_RC = exit status
stop_jobstore() {
  local deadline
  JS_RC=""
  [ -n "$JS_PID" ] || return 0
  kill -TERM "$JS_PID" 2>/dev/null || true
  deadline=$(($(date +%s) + 15))
  while alive "$JS_PID" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
  if alive "$JS_PID"; then
    log "jobstore pid $JS_PID still alive 15s after SIGTERM: SIGKILL"
    kill -KILL "$JS_PID" 2>/dev/null || true
  fi
  JS_RC=0
  wait "$JS_PID" 2>/dev/null || JS_RC=$?
  JS_PID=""
}

# --- per-backend state -----------------------------------------------------------------------
# B: backend label; JOB: its Flink job; $TMP/ops-$B: "request-id kind outcome" per operation
# (outcome: location|failure); $TMP/op-$B-<rid>.json: jobstore's COMPLETED status body.

record_op() { printf '%s %s %s\n' "$1" "$2" "$3" >>"$TMP/ops-$B"; }
saved() { printf '%s/op-%s-%s.json' "$TMP" "$B" "$1"; }

# await_op RID: polls jobstore's status until COMPLETED (90 s), saves that body;
# SAW_IN_PROGRESS=1 if an IN_PROGRESS answer (exactly Flink's shape) was seen first
await_op() {
  local rid=$1 out=$TMP/poll.json code status deadline
  SAW_IN_PROGRESS=0
  deadline=$(($(date +%s) + 90))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    code=$(http "$out" GET "$JS_URL/jobs/$JOB/savepoints/$rid")
    if [ "$code" != 200 ]; then
      REASON="GET $JS_URL/jobs/$JOB/savepoints/$rid: HTTP $code $(snippet "$out")"
      return 1
    fi
    status=$(jpy "$out" 'j["status"]["id"]')
    case $status in
      IN_PROGRESS)
        if [ "$(jpy "$out" 'j == {"status": {"id": "IN_PROGRESS"}, "operation": None}')" != true ]; then
          REASON="IN_PROGRESS answer is not {\"status\":{\"id\":\"IN_PROGRESS\"},\"operation\":null}: $(snippet "$out")"
          return 1
        fi
        SAW_IN_PROGRESS=1
        ;;
      COMPLETED)
        cp "$out" "$(saved "$rid")"
        return 0
        ;;
      *)
        REASON="unexpected status answer: $(snippet "$out")"
        return 1
        ;;
    esac
    sleep 0.1
  done
  REASON="operation $rid not COMPLETED through jobstore within 90s (last: $(snippet "$out"))"
  return 1
}

# verify_location RID: jobstore's saved COMPLETED body has a location under --savepoint-dir
# with a _metadata file on disk, and Flink answers 200 COMPLETED with the same location for the
# same trigger id (so Flink ran the savepoint under jobstore's request-id)
verify_location() {
  local rid=$1 loc path code fout=$TMP/flink.json
  loc=$(jpy "$(saved "$rid")" 'j["operation"]["location"]')
  if [ -z "$loc" ]; then
    REASON="COMPLETED without a location: $(snippet "$(saved "$rid")" 1500)"
    return 1
  fi
  case $loc in
    file:/*) ;;
    *) REASON="location is not file:/...: $loc"; return 1 ;;
  esac
  path=${loc#file:}
  case $path in
    "$TMP/sp/"*) ;;
    *) REASON="location $loc is not under the --savepoint-dir file://$TMP/sp"; return 1 ;;
  esac
  if [ ! -f "$path/_metadata" ]; then
    REASON="no $path/_metadata on disk (location $loc)"
    return 1
  fi
  code=$(http "$fout" GET "$FLINK_URL/jobs/$JOB/savepoints/$rid")
  if [ "$code" != 200 ]; then
    REASON="Flink does not know trigger id $rid (GET $FLINK_URL/jobs/$JOB/savepoints/$rid: HTTP $code $(snippet "$fout" 200))"
    return 1
  fi
  if ! json_equal "$fout" 'j["operation"]["location"]' "$(saved "$rid")" 'j["operation"]["location"]'; then
    REASON="Flink's answer for $rid differs from jobstore's: Flink $(snippet "$fout" 300), jobstore $loc"
    return 1
  fi
  log "$rid: $loc (Flink agrees)"
}

# --- checks ----------------------------------------------------------------------------------

# savepoint through jobstore on the running job; $1 = body, $2 = expected request-id or ""
chk_savepoint() {
  local body=$1 want=$2 out=$TMP/out.json code rid
  code=$(http "$out" POST "$JS_URL/jobs/$JOB/savepoints" "$body")
  if [ "$code" != 202 ]; then
    REASON="POST /jobs/$JOB/savepoints $body: HTTP $code $(snippet "$out")"
    return 1
  fi
  rid=$(jpy "$out" 'j["request-id"]')
  if ! [[ $rid =~ ^[0-9a-f]{32}$ ]]; then
    REASON="202 without a request-id: $(snippet "$out")"
    return 1
  fi
  if [ -n "$want" ] && [ "$rid" != "$want" ]; then
    REASON="request-id $rid is not the triggerId $want"
    return 1
  fi
  record_op "$rid" SAVEPOINT location
  await_op "$rid" || return 1
  if [ "$SAW_IN_PROGRESS" != 1 ]; then
    REASON="operation $rid was never IN_PROGRESS through jobstore (snapshot sleeps 1 s)"
    return 1
  fi
  verify_location "$rid"
}

# stop-with-savepoint through jobstore: operation COMPLETED with a location, job FINISHED
chk_stop() {
  local out=$TMP/out.json code rid
  code=$(http "$out" POST "$JS_URL/jobs/$JOB/stop" '{"drain": false}')
  if [ "$code" != 202 ]; then
    REASON="POST /jobs/$JOB/stop {\"drain\": false}: HTTP $code $(snippet "$out")"
    return 1
  fi
  rid=$(jpy "$out" 'j["request-id"]')
  if ! [[ $rid =~ ^[0-9a-f]{32}$ ]]; then
    REASON="202 without a request-id: $(snippet "$out")"
    return 1
  fi
  record_op "$rid" STOP_WITH_SAVEPOINT location
  await_op "$rid" || return 1
  verify_location "$rid" || return 1
  if ! "$CLUSTER" wait-job "$FLINK_DIR" "$JOB" FINISHED 60 >/dev/null; then
    REASON="Flink job $JOB is not FINISHED after the stop"
    return 1
  fi
  code=$(http "$out" GET "$FLINK_URL/jobs/$JOB/status")
  if [ "$code" != 200 ] || [ "$(jpy "$out" 'j["status"]')" != FINISHED ]; then
    REASON="Flink GET /jobs/$JOB/status: HTTP $code $(snippet "$out")"
    return 1
  fi
}

# savepoint of the FINISHED job: COMPLETED with Flink's own failure-cause, stored verbatim
chk_finished_job() {
  local out=$TMP/out.json fout=$TMP/flink.json code rid fc
  code=$(http "$out" GET "$FLINK_URL/jobs/$JOB/status")
  if [ "$(jpy "$out" 'j["status"]')" != FINISHED ]; then
    REASON="precondition: Flink job $JOB is not FINISHED: HTTP $code $(snippet "$out")"
    return 1
  fi
  code=$(http "$out" POST "$JS_URL/jobs/$JOB/savepoints" '{}')
  if [ "$code" != 202 ]; then
    REASON="POST /jobs/$JOB/savepoints {} (finished job): HTTP $code $(snippet "$out")"
    return 1
  fi
  rid=$(jpy "$out" 'j["request-id"]')
  if ! [[ $rid =~ ^[0-9a-f]{32}$ ]]; then
    REASON="202 without a request-id: $(snippet "$out")"
    return 1
  fi
  record_op "$rid" SAVEPOINT failure
  await_op "$rid" || return 1
  fc=$(saved "$rid")
  if [ "$(jpy "$fc" 'set(j["operation"]) == {"failure-cause"} and isinstance(j["operation"]["failure-cause"], dict)')" != true ]; then
    REASON="COMPLETED without (only) a failure-cause: $(snippet "$fc" 600)"
    return 1
  fi
  if [ "$(jpy "$fc" '"FlinkJobNotFoundException" in j["operation"]["failure-cause"]["class"] + j["operation"]["failure-cause"]["stack-trace"]')" != true ]; then
    REASON="failure-cause does not mention FlinkJobNotFoundException: $(snippet "$fc" 600)"
    return 1
  fi
  if [ "$(jpy "$fc" 'j["operation"]["failure-cause"]["class"].startswith("jobstore.")')" != false ]; then
    REASON="failure-cause is jobstore's own, not Flink's: $(snippet "$fc" 600)"
    return 1
  fi
  code=$(http "$fout" GET "$FLINK_URL/jobs/$JOB/savepoints/$rid")
  case $code in
    200)
      if ! json_equal "$fout" 'j["operation"]["failure-cause"]' "$fc" 'j["operation"]["failure-cause"]'; then
        REASON="jobstore's failure-cause differs from Flink's for trigger $rid: jobstore $(snippet "$fc" 300) / Flink $(snippet "$fout" 300)"
        return 1
      fi
      log "$rid: failure-cause equal to Flink's ($(jpy "$fc" 'j["operation"]["failure-cause"]["class"]'))"
      ;;
    404) log "$rid: Flink no longer has the trigger; failure-cause not compared" ;;
    *)
      REASON="Flink GET /jobs/$JOB/savepoints/$rid: HTTP $code $(snippet "$fout")"
      return 1
      ;;
  esac
}

# the management listing shows every operation of the job with its kind, COMPLETED and the
# stored outcome (and nothing else for that job)
chk_listing() {
  local out=$TMP/list.json code
  code=$(http "$out" GET "$JS_URL/v1/clusters/default/savepoint-operations?job-id=$JOB")
  if [ "$code" != 200 ]; then
    REASON="GET /v1/clusters/default/savepoint-operations?job-id=$JOB: HTTP $code $(snippet "$out")"
    return 1
  fi
  REASON=$(python3 - "$out" "$TMP/ops-$B" "$TMP" "$B" "$JOB" <<'PY'
import json, os, sys
listing, ops_file, tmp, backend, job = sys.argv[1:]
with open(listing) as f:
    got = {op.get("request-id"): op for op in json.load(f)["savepoint-operations"]}
want = [line.split() for line in open(ops_file) if line.strip()]
problems = []
for rid, kind, outcome in want:
    op = got.pop(rid, None)
    if op is None:
        problems.append(f"{rid} missing from the listing")
        continue
    wrong = {k: op.get(k) for k, v in
             (("kind", kind), ("status", "COMPLETED"), ("cluster-id", "default"), ("job-id", job))
             if op.get(k) != v}
    if wrong:
        problems.append(f"{rid} (expected {kind} COMPLETED) has {wrong}")
        continue
    path = os.path.join(tmp, f"op-{backend}-{rid}.json")
    if not os.path.exists(path):
        problems.append(f"{rid} never completed through the status route")
        continue
    with open(path) as f:
        status = json.load(f)["operation"]
    if outcome == "location":
        if op.get("location") != status.get("location") or op.get("failure-cause") is not None:
            problems.append(f"{rid}: location {op.get('location')!r}, status route says {status.get('location')!r}")
    elif op.get("failure-cause") != status.get("failure-cause") or op.get("location") is not None:
        problems.append(f"{rid}: failure-cause differs from the status route's")
    if not op.get("completed-at"):
        problems.append(f"{rid}: no completed-at")
for rid in got:
    problems.append(f"unexpected operation {rid} in the listing")
if not want:
    problems.append("no operations recorded for this job")
print("; ".join(problems))
PY
  ) || { REASON="listing unreadable: $(snippet "$out")"; return 1; }
  [ -z "$REASON" ] || return 1
  log "listing: $(wc -l <"$TMP/ops-$B") operations of job $JOB COMPLETED with their kinds"
}

# every operation of this backend answers exactly the saved COMPLETED body
same_answers() {
  local out=$TMP/out.json rid code
  while read -r rid _ _; do
    code=$(http "$out" GET "$JS_URL/jobs/$JOB/savepoints/$rid")
    if [ "$code" != 200 ]; then
      REASON="GET /jobs/$JOB/savepoints/$rid: HTTP $code $(snippet "$out")"
      return 1
    fi
    if [ ! -f "$(saved "$rid")" ]; then
      REASON="$rid never completed before, now: $(snippet "$out")"
      return 1
    fi
    if ! json_equal "$out" j "$(saved "$rid")" j; then
      REASON="$rid answers $(snippet "$out" 300), before: $(snippet "$(saved "$rid")" 300)"
      return 1
    fi
  done <"$TMP/ops-$B"
}

# jobstore restart (SIGTERM, start again on the same database): the operations still read
chk_restart() {
  local db=$1 logf=$2 rc_note=""
  stop_jobstore
  if [ "$JS_RC" != 0 ]; then rc_note="jobstore exited with status $JS_RC after SIGTERM (expected 0)"; fi
  if ! start_jobstore "$db" "$logf"; then
    REASON="jobstore did not start again on the same database${rc_note:+; $rc_note}"
    return 1
  fi
  same_answers || return 1
  if [ -n "$rc_note" ]; then REASON=$rc_note; return 1; fi
}

# after the JobManager restart: Flink answers 404 for every trigger, jobstore still COMPLETED
chk_flink_forgot() {
  local fout=$TMP/flink.json rid code
  while read -r rid _ _; do
    code=$(http "$fout" GET "$FLINK_URL/jobs/$JOB/savepoints/$rid")
    if [ "$code" != 404 ]; then
      REASON="Flink still answers HTTP $code for $rid after the JobManager restart: $(snippet "$fout" 200)"
      return 1
    fi
  done <"$TMP/ops-$B"
  same_answers
}

# --- phases ----------------------------------------------------------------------------------

# run_phase BACKEND DATABASE_URL JOB: the checks of one backend, up to the jobstore restart;
# leaves jobstore running
run_phase() {
  local t0
  B=$1 JOB=$3
  t0=$(date +%s)
  : >"$TMP/ops-$B"
  log "=== $B: jobstore on $(printf '%s' "$2" | sed 's#//[^@/]*@#//***@#'), Flink job $JOB"
  if ! start_jobstore "$2" "$TMP/jobstore-$B.log"; then
    fail "[$B] jobstore serve starts" "no 200 from /readyz (log: $(tail -n 5 "$TMP/jobstore-$B.log" | tr '\n' ' '))"
    return 0
  fi
  if ! "$CLUSTER" wait-job "$FLINK_DIR" "$JOB" RUNNING 120 >/dev/null; then
    fail "[$B] Flink job RUNNING" "job $JOB did not reach RUNNING with all tasks running"
    return 0
  fi
  check "[$B] savepoint {} through jobstore: IN_PROGRESS then COMPLETED, location from --savepoint-dir with _metadata on disk, Flink knows the request-id" \
    chk_savepoint '{}' ""
  local trig
  trig=$(random_hex 16)
  check "[$B] savepoint {\"triggerId\"} through jobstore: request-id = triggerId, IN_PROGRESS then COMPLETED, _metadata on disk, Flink knows the triggerId" \
    chk_savepoint "{\"triggerId\": \"$trig\"}" "$trig"
  check "[$B] stop-with-savepoint {\"drain\": false} through jobstore: COMPLETED with a location on disk, Flink job FINISHED" \
    chk_stop
  check "[$B] savepoint of the FINISHED job: COMPLETED with Flink's FlinkJobNotFoundException failure-cause, equal to Flink's JSON" \
    chk_finished_job
  check "[$B] GET /v1/clusters/default/savepoint-operations lists them: SAVEPOINT / STOP_WITH_SAVEPOINT, COMPLETED" \
    chk_listing
  check "[$B] after a jobstore restart (SIGTERM, same database) every operation answers the same" \
    chk_restart "$2" "$TMP/jobstore-$B.log"
  log "=== $B: $(($(date +%s) - t0))s"
}

# after_flink_forgot BACKEND DATABASE_URL JOB: jobstore (started if needed) after the JM restart
after_flink_forgot() {
  B=$1 JOB=$3
  if [ ! -s "$TMP/ops-$B" ]; then
    fail "[$B] operations readable after Flink forgot them" "no operations were created in this backend's phase"
    return 0
  fi
  if [ -z "$JS_PID" ] && ! start_jobstore "$2" "$TMP/jobstore-$B.log"; then
    fail "[$B] jobstore serve starts (after the JobManager restart)" "no 200 from /readyz"
    return 0
  fi
  check "[$B] after Flink forgot the operations (JobManager restart: Flink 404): jobstore still COMPLETED, same location / failure-cause" \
    chk_flink_forgot
  check "[$B] listing still shows every operation COMPLETED after Flink forgot them" \
    chk_listing
}

# --- main ------------------------------------------------------------------------------------

command -v curl >/dev/null || die "curl is required"
command -v python3 >/dev/null || die "python3 is required"
command -v psql >/dev/null || die "psql is required (to create and drop the test database)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/jobstore-sp-flink.XXXXXX")
TMP=$(cd "$TMP" && pwd -P)
FLINK_DIR=$TMP/flink
mkdir -p "$TMP/sp"
log "scratch folder $TMP"

# jobstore binary
if [ -n "${JOBSTORE_BIN:-}" ]; then
  [ -x "$JOBSTORE_BIN" ] || die "JOBSTORE_BIN=$JOBSTORE_BIN is not an executable"
else
  JOBSTORE_BIN=$REPO_ROOT/target/debug/jobstore
  if [ ! -x "$JOBSTORE_BIN" ]; then
    log "building jobstore (cargo build --bin jobstore)"
    (cd "$REPO_ROOT" && cargo build --bin jobstore >&2) || die "cargo build --bin jobstore failed"
  fi
  [ -x "$JOBSTORE_BIN" ] || die "no $JOBSTORE_BIN after the build"
fi
log "jobstore binary $JOBSTORE_BIN"

# Flink install and probe job
FLINK_HOME=$("$SCRIPT_DIR/flink/install.sh") || die "scripts/flink/install.sh failed"
export FLINK_HOME
FLINK_JOB_JAR=$("$SCRIPT_DIR/flink/build-probe-job.sh") || die "scripts/flink/build-probe-job.sh failed"
export FLINK_JOB_JAR

# database (the name is ours alone: created here, dropped by the trap)
psql_admin 'SELECT 1' >/dev/null || die "PostgreSQL not reachable as $PG_USER@$PG_HOST:$PG_PORT"
DB_NAME=jobstore_flink_$(random_hex 6)
psql_admin "CREATE DATABASE $DB_NAME" || { DB_NAME=""; die "could not create the test database"; }
PG_URL=postgres://$PG_USER@$PG_HOST:$PG_PORT/$DB_NAME
SQLITE_URL=sqlite://$TMP/jobstore.db
log "databases: $PG_URL and $SQLITE_URL"

# one Flink cluster, without execution.checkpointing.savepoint-dir
FLINK_STARTED=1
t=$(date +%s)
FLINK_URL=$(FLINK_EXTRA_CONF="" "$CLUSTER" start "$FLINK_DIR") || die "Flink cluster did not start"
log "Flink at $FLINK_URL after $(($(date +%s) - t))s"
if grep -q 'savepoint-dir\|state.savepoints.dir' "$FLINK_DIR/conf/config.yaml"; then
  die "the Flink cluster has a default savepoint dir configured; this suite needs it unset"
fi

# one unbounded job per backend (20 records/s, snapshotState sleeps 1 s), submitted up front
JOB_PG=$("$CLUSTER" submit "$FLINK_DIR" 0 20 jobstore-sp-postgres 1000) || die "job submission failed"
JOB_SQLITE=$("$CLUSTER" submit "$FLINK_DIR" 0 20 jobstore-sp-sqlite 1000) || die "job submission failed"
[[ $JOB_PG =~ ^[0-9a-f]{32}$ && $JOB_SQLITE =~ ^[0-9a-f]{32}$ ]] \
  || die "submit printed no job ids: $JOB_PG $JOB_SQLITE"

run_phase postgres "$PG_URL" "$JOB_PG"
stop_jobstore
run_phase sqlite "$SQLITE_URL" "$JOB_SQLITE"

# Flink forgets every operation: its JobManager keeps them in memory only.
t=$(date +%s)
log "restarting Flink's JobManager"
"$CLUSTER" restart-jm "$FLINK_DIR" >/dev/null || die "cluster.sh restart-jm failed"
log "JobManager restarted in $(($(date +%s) - t))s"

after_flink_forgot sqlite "$SQLITE_URL" "$JOB_SQLITE"
stop_jobstore
after_flink_forgot postgres "$PG_URL" "$JOB_PG"
stop_jobstore
