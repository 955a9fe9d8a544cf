#!/usr/bin/env bash
# Fuzzes every route of jobstore's own OpenAPI document (GET /openapi.json) with
# schemathesis, against a running `jobstore serve` on SQLite and on PostgreSQL.
#
# Checks: not_a_server_error (no 5xx), status_code_conformance, content_type_conformance,
# response_schema_conformance, and nothing_stored_by_a_rejected_write (scripts/fuzz/hooks.py:
# a POST/PUT/DELETE answered 4xx leaves the store's counts and clusters as they were). The
# server must also still be running at the end (no crash) and log no panic.
#
# Prints the case counts per backend and ends with `N passed, M failed` (N and M count test
# cases). Bounded: --max-examples per operation (FUZZ_MAX_EXAMPLES, default 10, besides
# the coverage phase's systematic cases), one worker per backend, the backends side by side,
# each under a time limit (FUZZ_TIME_LIMIT, 900 s: a guard against a hang, not a budget; a run takes 5 to 7 min on the 2-core machine beside the release build).
#
# Needs python3 with venv (schemathesis is installed from PyPI into .flink/fuzz-venv, which
# git ignores) and PostgreSQL at DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/postgres; a database is created and dropped).
# FUZZ_BACKENDS="sqlite" skips PostgreSQL. FUZZ_SEED fixes the generated cases.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-10}"
SEED="${FUZZ_SEED:-20261130}"
BACKENDS="${FUZZ_BACKENDS:-sqlite postgres}"
VENV="$(realpath -m "${FUZZ_VENV:-.flink/fuzz-venv}")"
TIME_LIMIT="${FUZZ_TIME_LIMIT:-900}"
DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}"

if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION"; then
  echo "installing schemathesis $SCHEMATHESIS_VERSION into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

cargo build --quiet --locked --bin jobstore
BIN="$PWD/target/debug/jobstore"

WORK="$(mktemp -d)"
cleanup() {
  # Each backend's server and database, by the pid and name its run wrote down.
  for f in "$WORK"/*.pid; do
    [ -e "$f" ] || continue
    pid="$(cat "$f")"
    kill "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  for f in "$WORK"/*.pgdb; do
    [ -e "$f" ] || continue
    psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS \"$(cat "$f")\" WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# One backend's run: its server, schemathesis against it, the checks on the server afterwards.
# Writes "PASSED FAILED" (test cases) to $WORK/$backend.result; its messages go to stderr.
fuzz_backend() {
  local backend="$1" url port base server_pid status passed=0 failed=0
  case "$backend" in
    sqlite) url="sqlite://$WORK/fuzz.db" ;;
    postgres)
      local db
      db="jobstore_fuzz_$(python3 -c 'import uuid; print(uuid.uuid4().hex)')"
      echo "$db" >"$WORK/$backend.pgdb"
      psql -q "$DATABASE_URL" -c "CREATE DATABASE \"$db\"" >/dev/null
      url="$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' "$DATABASE_URL" "$db")"
      ;;
    *) echo "unknown backend $backend" >&2; return 2 ;;
  esac
  port="$(free_port)"
  base="http://127.0.0.1:$port"
  env -u JOBSTORE_TOKENS JOBSTORE_LOG=warn "$BIN" serve --database-url "$url" --listen "127.0.0.1:$port" \
    --savepoint-dir "file://$WORK/$backend-savepoints" >"$WORK/$backend-serve.log" 2>&1 &
  server_pid=$!
  echo "$server_pid" >"$WORK/$backend.pid"
  for _ in $(seq 1 150); do
    curl -fsS "$base/readyz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$WORK/$backend-serve.log" >&2; return 1; }
    sleep 0.2
  done
  curl -fsS "$base/readyz" >/dev/null

  echo "==== fuzz $backend: schemathesis $SCHEMATHESIS_VERSION, --max-examples $MAX_EXAMPLES --seed $SEED against $base" >&2
  mkdir -p "$WORK/$backend-cwd"
  set +e
  # Run from a folder of its own: schemathesis keeps a cache in its working directory.
  (cd "$WORK/$backend-cwd" && FUZZ_BASE="$base" FUZZ_STATS="$WORK/$backend-stats.json" PYTHONPATH="$ROOT/scripts/fuzz" SCHEMATHESIS_HOOKS=hooks \
    timeout "$TIME_LIMIT" "$VENV/bin/schemathesis" run "$base/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,nothing_stored_by_a_rejected_write \
    --max-examples "$MAX_EXAMPLES" --seed "$SEED" --workers 1 --request-timeout 20 \
    --suppress-health-check all --no-color \
    --report json --report-json-path "$WORK/$backend-report.json" >"$WORK/$backend-schemathesis.log" 2>&1)
  status=$?
  set -e
  if [ ! -s "$WORK/$backend-report.json" ] || [ ! -s "$WORK/$backend-stats.json" ]; then
    echo "fuzz $backend: schemathesis did not complete (exit $status; 124: past FUZZ_TIME_LIMIT=${TIME_LIMIT}s):" >&2
    tail -50 "$WORK/$backend-schemathesis.log" >&2
    failed=$((failed + 1))
  else
    "$VENV/bin/python" scripts/fuzz/summary.py "$backend" "$WORK/$backend-report.json" \
      "$WORK/$backend-stats.json" "$WORK/$backend-counts"
    read -r generated with_failures _responses server_errors _checked stored <"$WORK/$backend-counts"
    if [ "$with_failures" -gt 0 ] || [ "$status" -ne 0 ]; then
      grep -E -A25 '^_+ ' "$WORK/$backend-schemathesis.log" | head -150 >&2 || tail -60 "$WORK/$backend-schemathesis.log" >&2
    fi
    passed=$((generated - with_failures))
    failed=$((failed + with_failures))
    # A 5xx or a changed store is a failure even where schemathesis counted no case for it.
    if [ "$server_errors" -gt 0 ] && [ "$with_failures" -eq 0 ]; then failed=$((failed + server_errors)); fi
    if [ "$stored" -gt 0 ] && [ "$with_failures" -eq 0 ]; then failed=$((failed + stored)); fi
  fi
  # No crash: still running, and no panic in its log.
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "fuzz $backend: jobstore serve is no longer running" >&2
    failed=$((failed + 1))
  fi
  if grep -q "panicked" "$WORK/$backend-serve.log"; then
    echo "fuzz $backend: jobstore serve panicked:" >&2
    grep -A5 panicked "$WORK/$backend-serve.log" >&2
    failed=$((failed + 1))
  fi
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  echo "$passed $failed" >"$WORK/$backend.result"
}

# The backends side by side (one schemathesis per core, each with its own server); each
# one's messages are printed whole when it ends, so that they do not interleave.
ROOT="$PWD"
for backend in $BACKENDS; do
  ( fuzz_backend "$backend" >"$WORK/$backend.out" 2>&1 || true ) &
done
wait
passed=0
failed=0
for backend in $BACKENDS; do
  cat "$WORK/$backend.out" >&2
  if [ -s "$WORK/$backend.result" ]; then
    read -r p f <"$WORK/$backend.result"
  else
    echo "fuzz $backend: did not finish" >&2
    p=0; f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
done

echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
