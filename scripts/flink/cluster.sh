#!/usr/bin/env bash
# Runs a real Apache Flink 2.3.0 standalone session cluster (1 JobManager + 1 TaskManager
# with 4 slots) for tests, entirely inside one scratch folder DIR, on 127.0.0.1 only.
#
# Usage:
#   cluster.sh start DIR        start a cluster; stdout: REST URL (http://127.0.0.1:PORT)
#   cluster.sh stop DIR         stop it (idempotent; exit 0 when nothing runs)
#   cluster.sh restart-jm DIR   stop the JobManager only and start it again; waits until the
#                               TaskManager has re-registered; stdout: REST URL (unchanged)
#   cluster.sh submit DIR ARG...  run the probe job (or $FLINK_JOB_JAR) with program args ARG...;
#                               stdout: the job id (32 hex)
#   cluster.sh wait-job DIR JOBID STATE [TIMEOUT_S]
#                               poll the job until it is in STATE (e.g. RUNNING, FINISHED,
#                               FAILED, CANCELED); RUNNING also waits until every task of the
#                               job is RUNNING (so a savepoint can be triggered); stdout: the
#                               state; exit 1 if the job reached another terminal state or on
#                               timeout (default 120 s)
#   cluster.sh url DIR          stdout: the REST URL of a started cluster
#
# Env (start):
#   FLINK_HOME           Flink install (default: output of install.sh, which installs if needed)
#   JOBSTORE_FLINK_CACHE cache folder for install.sh / build-probe-job.sh (default <repo>/.flink)
#   FLINK_EXTRA_CONF     extra config.yaml lines (flattened keys, "key: value", one per line);
#                        a key given here replaces the default line with the same key
#   FLINK_EXTRA_JARS     space-separated jar paths linked into the cluster's lib folder
#   FLINK_START_TIMEOUT  seconds to wait for the TaskManager to register (default 180)
# Env (submit):
#   FLINK_JOB_JAR        jar to submit instead of the probe job (default: build-probe-job.sh)
#   FLINK_JOB_PARALLELISM  job parallelism (default 1)
#   FLINK_JOB_SAVEPOINT  savepoint path to restore the job from (optional)
# Env (stop / restart-jm):
#   FLINK_STOP_GRACE     seconds to wait for a process after the stop scripts before
#                        SIGKILL (default 15)
#
# Layout of DIR: conf/ (config.yaml, log4j, masters, workers), log/, pid/, lib/ (links), tmp/,
# rest-url, flink-home, jar-ids (uploaded jar cache). Processes are only ever signalled by the
# pids in DIR/pid, and only if their command line refers to DIR/log.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IDENT=jobstore
JM_PID_NAME=flink-$IDENT-standalonesession.pid
TM_PID_NAME=flink-$IDENT-taskexecutor.pid

log() { printf '[flink-cluster] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

# --- helpers ---------------------------------------------------------------------------------

abs_dir() { # create (if needed) and print the absolute path of $1
  mkdir -p "$1"
  (cd "$1" && pwd -P)
}

existing_dir() { # print the absolute path of an existing dir $1
  [ -d "$1" ] || die "no such cluster folder: $1"
  (cd "$1" && pwd -P)
}

resolve_flink_home() { # $1 = DIR; prints FLINK_HOME
  if [ -n "${FLINK_HOME:-}" ]; then
    printf '%s\n' "$FLINK_HOME"
  elif [ -f "$1/flink-home" ]; then
    cat "$1/flink-home"
  else
    "$SCRIPT_DIR/install.sh"
  fi
}

export_env() { # $1 = DIR; environment shared by every Flink script call
  export FLINK_CONF_DIR=$1/conf FLINK_LOG_DIR=$1/log FLINK_PID_DIR=$1/pid FLINK_LIB_DIR=$1/lib
  export FLINK_IDENT_STRING=$IDENT
  # Use what config.yaml says, not whatever the caller's environment says.
  unset FLINK_ENV_JAVA_OPTS FLINK_ENV_JAVA_OPTS_JM FLINK_ENV_JAVA_OPTS_TM
}

free_ports() { # $1 = count; prints that many distinct free TCP ports on 127.0.0.1
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

pids_in() { # $1 = pid file; prints the numeric pids in it
  [ -f "$1" ] || return 0
  grep -E '^[0-9]+$' "$1" || true
}

ours() { # $1 = pid, $2 = DIR: is it alive and a Flink process of this cluster?
  [ -r "/proc/$1/cmdline" ] || return 1
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "-Dlog.file=$2/log/"
}

wait_gone() { # $1 = DIR, $2 = grace seconds, rest = pids; SIGKILL survivors after the grace
  local dir=$1 grace=$2 deadline p alive
  shift 2
  deadline=$(( $(date +%s) + grace ))
  while :; do
    alive=()
    for p in "$@"; do
      if ours "$p" "$dir"; then alive+=("$p"); fi
    done
    [ "${#alive[@]}" -eq 0 ] && return 0
    [ "$(date +%s)" -ge "$deadline" ] && break
    sleep 0.5
  done
  for p in "${alive[@]}"; do
    log "pid $p still alive after ${grace}s: SIGKILL"
    kill -9 "$p" 2>/dev/null || true
  done
  sleep 0.5
}

jm_pid() { # $1 = DIR; the newest live JobManager pid of this cluster
  local p
  p=$(pids_in "$1/pid/$JM_PID_NAME" | tail -n 1)
  [ -n "$p" ] && ours "$p" "$1" && printf '%s\n' "$p"
}

print_logs() { # $1 = DIR
  local f
  for f in "$1"/log/*.log "$1"/log/*.out; do
    [ -f "$f" ] || continue
    printf '===== last lines of %s =====\n' "$f" >&2
    tail -n 40 "$f" >&2
  done
}

# Polls GET /overview until "taskmanagers":1. $1 = DIR, $2 = URL, $3 = timeout s.
# Returns 1 on timeout, 2 when the JobManager process died.
wait_ready() {
  local dir=$1 url=$2 timeout=$3 deadline body
  deadline=$(( $(date +%s) + timeout ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    body=$(curl -sS --max-time 5 "$url/overview" 2>/dev/null || true)
    case $body in
      *'"taskmanagers":1'*) return 0 ;;
    esac
    if ! jm_pid "$dir" >/dev/null; then
      sleep 1
      jm_pid "$dir" >/dev/null || return 2
    fi
    sleep 0.5
  done
  return 1
}

rest_url() { # $1 = DIR
  [ -f "$1/rest-url" ] || die "$1/rest-url missing: is the cluster started?"
  cat "$1/rest-url"
}

# --- config ----------------------------------------------------------------------------------

write_conf() { # $1 = DIR, $2 = FLINK_HOME, $3 = rest port, $4 = rpc port, $5 = blob port
  local dir=$1 home=$2 rest=$3 rpc=$4 blob=$5 opts f
  mkdir -p "$dir/conf"
  for f in "$home"/conf/log4j*.properties "$home"/conf/logback*.xml; do
    [ -f "$f" ] && cp -f "$f" "$dir/conf/"
  done
  # env.java.opts.all from the distribution's config.yaml (nested: env: java: opts: all: ...)
  opts=$(awk '
    /^env:/ { in_env = 1; next }
    in_env && /^[^ #]/ { in_env = 0 }
    in_env && /^[ ]+all:/ { sub(/^[ ]+all:[ ]*/, ""); print; exit }
  ' "$home/conf/config.yaml")
  [ -n "$opts" ] || log "WARN: no env.java.opts.all in $home/conf/config.yaml"

  {
    echo "# written by scripts/flink/cluster.sh"
    echo "env.java.opts.all: $opts -Djava.io.tmpdir=$dir/tmp"
    echo "jobmanager.rpc.address: 127.0.0.1"
    echo "jobmanager.bind-host: 127.0.0.1"
    echo "jobmanager.rpc.port: $rpc"
    echo "jobmanager.memory.process.size: 1024m"
    echo "jobmanager.execution.failover-strategy: region"
    echo "taskmanager.host: 127.0.0.1"
    echo "taskmanager.bind-host: 127.0.0.1"
    echo "# 0 = the OS picks a free port when the TaskManager binds"
    echo "taskmanager.rpc.port: 0"
    echo "taskmanager.data.port: 0"
    echo "taskmanager.memory.process.size: 1280m"
    echo "taskmanager.numberOfTaskSlots: 4"
    echo "parallelism.default: 1"
    echo "blob.server.port: $blob"
    echo "rest.address: 127.0.0.1"
    echo "rest.bind-address: 127.0.0.1"
    echo "rest.port: $rest"
    echo "io.tmp.dirs: $dir/tmp"
    echo "web.tmpdir: $dir/tmp"
    echo "# faster detection of a restarted JobManager by the TaskManager (default 50 s)"
    echo "heartbeat.interval: 5000"
    echo "heartbeat.timeout: 20000"
  } >"$dir/conf/config.base.yaml"

  printf '%s\n' "${FLINK_EXTRA_CONF:-}" >"$dir/conf/config.extra.yaml"
  # Drop default lines whose key the extra lines set, then append the extra lines.
  awk '
    function key(line) {
      if (match(line, /^[A-Za-z0-9_.-]+[ \t]*:/)) {
        line = substr(line, 1, RLENGTH); sub(/[ \t]*:$/, "", line); return line
      }
      return ""
    }
    NR == FNR { k = key($0); if (k != "") extra[k] = 1; next }
    { k = key($0); if (k != "" && (k in extra)) next; print }
  ' "$dir/conf/config.extra.yaml" "$dir/conf/config.base.yaml" >"$dir/conf/config.yaml"
  if [ -n "${FLINK_EXTRA_CONF:-}" ]; then
    { echo "# FLINK_EXTRA_CONF"; cat "$dir/conf/config.extra.yaml"; } >>"$dir/conf/config.yaml"
  fi
  echo "127.0.0.1:$rest" >"$dir/conf/masters"
  echo "127.0.0.1" >"$dir/conf/workers"
}

write_lib() { # $1 = DIR, $2 = FLINK_HOME
  local dir=$1 home=$2 j
  rm -rf "${dir:?}/lib"
  mkdir -p "$dir/lib"
  for j in "$home"/lib/*.jar; do
    ln -s "$j" "$dir/lib/$(basename "$j")"
  done
  for j in ${FLINK_EXTRA_JARS:-}; do
    [ -f "$j" ] || die "FLINK_EXTRA_JARS: no such file: $j"
    j=$(cd "$(dirname "$j")" && printf '%s/%s' "$(pwd -P)" "$(basename "$j")")
    ln -sf "$j" "$dir/lib/$(basename "$j")"
  done
}

# --- commands --------------------------------------------------------------------------------

cmd_stop() { # $1 = DIR
  local dir home grace pids p tm_stopper
  [ -d "$1" ] || { log "nothing to stop: $1 does not exist"; return 0; }
  dir=$(existing_dir "$1")
  grace=${FLINK_STOP_GRACE:-15}
  pids=()
  for p in $(pids_in "$dir/pid/$TM_PID_NAME") $(pids_in "$dir/pid/$JM_PID_NAME"); do
    if ours "$p" "$dir"; then pids+=("$p"); fi
  done
  if [ "${#pids[@]}" -eq 0 ]; then
    log "no running Flink process in $dir"
  else
    home=$(resolve_flink_home "$dir" 2>/dev/null || true)
    if [ -n "$home" ] && [ -x "$home/bin/taskmanager.sh" ]; then
      export_env "$dir"
      log "stopping TaskManager and JobManager in $dir (pids ${pids[*]})"
      # Both scripts spend ~2 s parsing the config before they take the pid-dir lock: run
      # them side by side (flink-daemon.sh serialises the actual stopping).
      "$home/bin/taskmanager.sh" stop-all >&2 &
      tm_stopper=$!
      "$home/bin/jobmanager.sh" stop-all >&2 || log "jobmanager.sh stop-all failed"
      wait "$tm_stopper" || log "taskmanager.sh stop-all failed"
    else
      log "no Flink scripts found: sending SIGTERM to ${pids[*]}"
      kill "${pids[@]}" 2>/dev/null || true
    fi
    wait_gone "$dir" "$grace" "${pids[@]}"
  fi
  rm -f "$dir/pid/$TM_PID_NAME" "$dir/pid/$JM_PID_NAME" "$dir/rest-url" "$dir/jar-ids"
  log "stopped cluster in $dir"
}

cmd_start() { # $1 = DIR
  local dir home timeout attempt rest rpc blob url rc p start_ts
  dir=$(abs_dir "$1")
  case $dir in *[[:space:]]*) die "cluster folder must not contain whitespace: $dir" ;; esac
  for p in $(pids_in "$dir/pid/$TM_PID_NAME") $(pids_in "$dir/pid/$JM_PID_NAME"); do
    ours "$p" "$dir" && die "a cluster is already running in $dir (pid $p); stop it first"
  done
  command -v curl >/dev/null 2>&1 || die "curl is required"
  home=$(resolve_flink_home "$dir")
  [ -x "$home/bin/start-cluster.sh" ] || die "no bin/start-cluster.sh in FLINK_HOME=$home"
  timeout=${FLINK_START_TIMEOUT:-180}
  mkdir -p "$dir/conf" "$dir/log" "$dir/pid" "$dir/lib" "$dir/tmp"
  rm -f "$dir/pid/$TM_PID_NAME" "$dir/pid/$JM_PID_NAME" "$dir/rest-url" "$dir/jar-ids"
  printf '%s\n' "$home" >"$dir/flink-home"
  write_lib "$dir" "$home"
  export_env "$dir"
  start_ts=$(date +%s)
  # Interrupted while starting: do not leave half a cluster behind.
  # shellcheck disable=SC2064
  trap "log 'interrupted: stopping'; FLINK_STOP_GRACE=5 cmd_stop '$dir'; exit 130" INT TERM HUP

  # A port picked here can be taken by someone else before Flink binds it: retry then.
  for attempt in 1 2 3; do
    read -r rest rpc blob <<<"$(free_ports 3)"
    write_conf "$dir" "$home" "$rest" "$rpc" "$blob"
    url=http://127.0.0.1:$rest
    log "starting Flink in $dir (rest $rest, rpc $rpc, blob $blob; attempt $attempt)"
    "$home/bin/start-cluster.sh" >&2 || log "start-cluster.sh exited with status $?"
    rc=0
    wait_ready "$dir" "$url" "$timeout" || rc=$?
    if [ "$rc" -eq 0 ]; then
      printf '%s\n' "$url" >"$dir/rest-url.tmp"
      mv -f "$dir/rest-url.tmp" "$dir/rest-url"
      trap - INT TERM HUP
      log "cluster ready at $url after $(( $(date +%s) - start_ts ))s"
      printf '%s\n' "$url"
      return 0
    fi
    if [ "$rc" -eq 2 ] && [ "$attempt" -lt 3 ] \
      && grep -qs 'Address already in use\|BindException' "$dir"/log/*standalonesession*; then
      log "JobManager could not bind its ports; retrying with new ports"
      FLINK_STOP_GRACE=5 cmd_stop "$dir"
      rm -f "$dir"/log/*
      continue
    fi
    break
  done
  if [ "$rc" -eq 2 ]; then
    log "the JobManager process exited during start"
  else
    log "no TaskManager registered within ${timeout}s"
  fi
  print_logs "$dir"
  cmd_stop "$dir" || true
  exit 1
}

cmd_restart_jm() { # $1 = DIR
  local dir home url old grace rc
  dir=$(existing_dir "$1")
  url=$(rest_url "$dir")
  home=$(resolve_flink_home "$dir")
  grace=${FLINK_STOP_GRACE:-15}
  export_env "$dir"
  old=$(jm_pid "$dir" || true)
  if [ -n "$old" ]; then
    log "stopping JobManager (pid $old)"
    "$home/bin/jobmanager.sh" stop-all >&2 || log "jobmanager.sh stop-all failed"
    wait_gone "$dir" "$grace" "$old"
  else
    log "no JobManager running in $dir"
  fi
  rm -f "$dir/pid/$JM_PID_NAME" "$dir/jar-ids"
  log "starting JobManager"
  "$home/bin/jobmanager.sh" start >&2 || log "jobmanager.sh start exited with status $?"
  rc=0
  wait_ready "$dir" "$url" "${FLINK_START_TIMEOUT:-180}" || rc=$?
  if [ "$rc" -ne 0 ]; then
    log "JobManager restart failed (rc $rc)"
    print_logs "$dir"
    exit 1
  fi
  log "JobManager restarted; TaskManager registered"
  printf '%s\n' "$url"
}

json_field() { # $1 = field name; reads JSON on stdin
  python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

upload_jar() { # $1 = url, $2 = jar; prints the jar id
  local body
  body=$(curl -sS --fail-with-body --max-time 120 -X POST -H 'Expect:' \
    -F "jarfile=@$2" "$1/jars/upload") || die "jar upload failed: $body"
  basename "$(printf '%s' "$body" | json_field filename)"
}

cmd_submit() { # $1 = DIR, rest = program args
  local dir url jar sum jar_id payload out code body attempt
  dir=$(existing_dir "$1")
  shift
  url=$(rest_url "$dir")
  if [ -n "${FLINK_JOB_JAR:-}" ]; then
    jar=$FLINK_JOB_JAR
  else
    jar=$(FLINK_HOME=$(resolve_flink_home "$dir") "$SCRIPT_DIR/build-probe-job.sh")
  fi
  [ -f "$jar" ] || die "no such jar: $jar"
  sum=$(cksum <"$jar" | awk '{print $1 "-" $2}')
  payload=$(python3 -c '
import json, os, sys
body = {"programArgsList": sys.argv[1:],
        "parallelism": int(os.environ.get("FLINK_JOB_PARALLELISM") or 1)}
if os.environ.get("FLINK_JOB_SAVEPOINT"):
    body["savepointPath"] = os.environ["FLINK_JOB_SAVEPOINT"]
print(json.dumps(body))' "$@")
  out=$(mktemp)
  for attempt in 1 2; do
    jar_id=$(awk -v s="$sum" '$1 == s { id = $2 } END { print id }' "$dir/jar-ids" 2>/dev/null || true)
    if [ -z "$jar_id" ]; then
      jar_id=$(upload_jar "$url" "$jar")
      printf '%s %s\n' "$sum" "$jar_id" >>"$dir/jar-ids"
      log "uploaded $jar as $jar_id"
    fi
    code=$(curl -sS --max-time 120 -o "$out" -w '%{http_code}' -X POST \
      -H 'Content-Type: application/json' --data "$payload" "$url/jars/$jar_id/run") || code=000
    body=$(cat "$out")
    if [ "$code" = 200 ]; then
      rm -f "$out"
      printf '%s' "$body" | json_field jobid
      return 0
    fi
    # The JobManager forgets uploaded jars when it restarts: upload again once.
    if [ "$attempt" -eq 1 ] && printf '%s' "$body" | grep -q 'does not exist'; then
      log "jar $jar_id is gone from the cluster; uploading again"
      awk -v s="$sum" '$1 != s' "$dir/jar-ids" >"$dir/jar-ids.tmp" || true
      mv -f "$dir/jar-ids.tmp" "$dir/jar-ids"
      continue
    fi
    break
  done
  rm -f "$out"
  die "job submission failed (HTTP $code): $(printf '%s' "$body" | head -c 2000)"
}

cmd_wait_job() { # $1 = DIR, $2 = job id, $3 = wanted state, $4 = timeout s
  local dir url job want timeout deadline state="" all_running
  dir=$(existing_dir "$1")
  url=$(rest_url "$dir")
  job=$2 want=$3 timeout=${4:-120}
  deadline=$(( $(date +%s) + timeout ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    # GET /jobs/:id -> "<job state> <1 if every vertex is RUNNING else 0>"
    read -r state all_running <<<"$(curl -sS --max-time 5 "$url/jobs/$job" 2>/dev/null \
      | python3 -c 'import json,sys
try:
    j = json.load(sys.stdin)
    v = j.get("vertices") or []
    ok = bool(v) and all(x.get("status") == "RUNNING" for x in v)
    print(j.get("state", ""), 1 if ok else 0)
except Exception:
    print("", 0)' 2>/dev/null || true)"
    state=${state:-}
    # RUNNING means: the job and all of its tasks run (a savepoint can be taken now).
    if [ "$state" = "$want" ] && { [ "$want" != RUNNING ] || [ "${all_running:-0}" = 1 ]; }; then
      printf '%s\n' "$state"
      return 0
    fi
    case $state in
      FINISHED | FAILED | CANCELED | SUSPENDED)
        log "job $job reached $state, wanted $want"
        printf '%s\n' "$state"
        return 1 ;;
    esac
    sleep 0.5
  done
  log "job $job not $want within ${timeout}s (last state: ${state:-unknown})"
  printf '%s\n' "${state:-unknown}"
  return 1
}

# --- main ------------------------------------------------------------------------------------

[ $# -ge 2 ] || usage
cmd=$1
shift
case $cmd in
  start) [ $# -eq 1 ] || usage; cmd_start "$1" ;;
  stop) [ $# -eq 1 ] || usage; cmd_stop "$1" ;;
  restart-jm) [ $# -eq 1 ] || usage; cmd_restart_jm "$1" ;;
  submit) cmd_submit "$@" ;;
  wait-job) { [ $# -eq 3 ] || [ $# -eq 4 ]; } || usage; cmd_wait_job "$@" ;;
  url) [ $# -eq 1 ] || usage; rest_url "$(existing_dir "$1")" ;;
  *) usage ;;
esac
