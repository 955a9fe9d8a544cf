#!/usr/bin/env bash
# The project's test command (README "Test"): formatting, lints, the Rust suites on
# PostgreSQL and SQLite, then the suites that run a real Flink 2.3.0.
#
# Needs PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres),
# Java 17 and Python 3 with pip (Flink, schemathesis and pytest are installed from PyPI into
# .flink/ on first use). The real-Flink suites are pytest's: scripts/flink-tests.sh runs
# tests/flink/test_*.py in two lanes side by side (pytest-xdist), pytest's summary line last;
# tests/flink/conftest.py says what they show and how to choose some.
# The PostgreSQL failover suite (tests/patroni/run.py: Patroni + etcd + HAProxy, Debian's packages
# installed by scripts/patroni/install.sh; needs root) runs beside the fuzzer;
# SKIP_PATRONI=1 leaves it out. SKIP_FLINK=1 leaves out the real-Flink suites.
# SKIP_DOCKER_CHECK=1 skips scripts/docker-check.py (the image's check, in the background at
# the lowest priority from clippy to the end). Each step's header gives the time since the start. The console's browser test (tests/integration/console.rs) needs Debian's chromium
# and chromium-driver: scripts/console/install.sh installs them when missing (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$SECONDS
step() { printf '\n==== [%dm%02ds] %s\n' $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)) "$*" >&2; }

# Background steps: each in a process group of its own (stopped as a group if this script
# ends early), its output kept in a file and printed under its step when it is waited for.
bg_dir=$(mktemp -d)
declare -A bg_pid=()
bg_start() { # NAME COMMAND-LINE
  setsid bash -c "$2" >"$bg_dir/$1.log" 2>&1 </dev/null &
  bg_pid[$1]=$!
}
# The lowest priority for a step: nice 19 for its processes and for its session's scheduling
# group (with the kernel's autogroups, a new session's processes share the cores equally with
# this script's whatever their nice value, unless the group itself is niced).
LOWEST='{ echo 19 >/proc/self/autogroup; } 2>/dev/null || true; nice -n 19'

bg_finish() { # NAME TITLE: waits for NAME, prints TITLE and its output; returns its exit status
  local rc=0
  wait "${bg_pid[$1]}" || rc=$?
  unset "bg_pid[$1]"
  step "$2 (exit $rc)"
  cat "$bg_dir/$1.log" >&2
  return "$rc"
}
bg_stop() {
  local p
  for p in "${bg_pid[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$bg_dir"
}
trap bg_stop EXIT

step "cargo fmt --check"
cargo fmt --all -- --check

# What is downloaded waits for the network, not for the cores: fetched while the Rust steps
# run. Debian's chromium and chromium-driver for the console's browser test
# (tests/integration/console.rs; scripts/console/install.sh, when missing, needs root); Flink
# 2.3.0 from PyPI (scripts/flink/install.sh, about 330 MB), which the real-Flink suites then
# find installed.
bg_start browser "bash scripts/console/install.sh"
if [ "${SKIP_FLINK:-0}" != 1 ]; then
  bg_start flink-install "bash scripts/flink/install.sh"
fi

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The Docker image's build stage on a copy of exactly what it copies (scripts/docker-check.py:
# the release profile from nothing, thin LTO, about 10 minutes of CPU), then the README's Run
# command (cargo run --release), which finds that release build done (cargo's artifacts do
# not depend on where the workspace lies, and the copy holds the same tracked files). At the
# lowest priority, from here to the end: it takes the cores the other steps leave idle (the
# tests' and the failover suites' waits), and none they ask for. Clippy has fetched the crates
# it builds offline. SKIP_DOCKER_CHECK=1 skips the first; the README's command then builds the
# release profile itself.
if [ "${SKIP_DOCKER_CHECK:-0}" = 1 ]; then
  bg_start image "echo 'SKIP_DOCKER_CHECK=1: scripts/docker-check.py was not run'; $LOWEST bash scripts/readme-run.sh"
else
  bg_start image "$LOWEST python3 scripts/docker-check.py && nice -n 19 bash scripts/readme-run.sh"
fi

bg_finish browser "the console's browser for tests/integration/console.rs (scripts/console/install.sh: Debian's chromium and chromium-driver, when missing)"

step "cargo test (PostgreSQL and SQLite)"
# Without backtraces: a failed test's message and its file:line stay in the last lines of the
# output, which is what a CI summary shows (a backtrace pushed them out of it).
RUST_BACKTRACE=0 cargo test --workspace --locked --all-targets -- --test-threads="${TEST_THREADS:-4}"

# The PostgreSQL failover suite waits on Patroni's timers most of the time: it runs beside the
# fuzzer. A failure of it is reported at the end: the real-Flink suites run anyway.
patroni_rc=0
if [ "${SKIP_PATRONI:-0}" != 1 ]; then
  bg_start patroni "python3 tests/patroni/run.py"
fi

step "fuzzing every route of the OpenAPI document (schemathesis)"
fuzz_rc=0
bash scripts/fuzz.sh || fuzz_rc=$?

if [ "${SKIP_PATRONI:-0}" = 1 ]; then
  step "SKIP_PATRONI=1: the PostgreSQL failover suite was not run"
else
  bg_finish patroni "jobstore on a real PostgreSQL HA cluster (Patroni, etcd, HAProxy), both replication modes" ||
    patroni_rc=$?
fi
[ "$fuzz_rc" -eq 0 ] || { echo "fuzzing failed" >&2; exit 1; }
# The verdicts of the steps that do not stop the others: the image's check (waited for here,
# at the end), then the failover suites.
verdicts() {
  local image_rc=0
  bg_finish image "the Docker image without Docker (scripts/docker-check.py: its build stage on a copy of what it copies, its command and health check), then the README's Run command as written (cargo run --release -- serve --help)" ||
    image_rc=$?
  [ "$image_rc" -eq 0 ] || { echo "the Docker image's check or the README's Run command failed" >&2; exit 1; }
  [ "$patroni_rc" -eq 0 ] || { echo "the PostgreSQL failover suite failed" >&2; exit 1; }
}

if [ "${SKIP_FLINK:-0}" = 1 ]; then
  step "SKIP_FLINK=1: the real-Flink suites were not run"
  verdicts
  exit 0
fi

# A failed install is tried again by the suites' own fixture, which reports it.
bg_finish flink-install "Flink 2.3.0 (scripts/flink/install.sh)" || true

step "the suites on a real Flink 2.3.0 (pytest): the harness, savepoints, the lifecycle, the HA plugin standalone, on ZooKeeper and as the whole HA backend"
flink_rc=0
bash scripts/flink-tests.sh || flink_rc=$?

# A Flink job on the plugin's jobstore HA mode through PostgreSQL failovers shorter and longer
# than the lease (tests/patroni/flink_failover.py, about 2 minutes), on the Flink installed above.
if [ "${SKIP_PATRONI:-0}" != 1 ]; then
  step "a Flink job on jobstore HA through PostgreSQL failovers (Patroni, synchronous mode)"
  python3 tests/patroni/run.py --modes sync flink || patroni_rc=$?
fi
verdicts
exit "$flink_rc"
