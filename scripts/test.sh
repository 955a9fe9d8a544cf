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
# installed by scripts/patroni/install.sh; needs root) runs before the real-Flink suites;
# SKIP_PATRONI=1 leaves it out. SKIP_FLINK=1 leaves out the real-Flink suites.
# SKIP_DOCKER_CHECK=1 skips
# scripts/docker-check.py. The console's browser test (tests/integration/console.rs) needs Debian's chromium
# and chromium-driver: scripts/console/install.sh installs them when missing (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==== %s\n' "$*" >&2; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "the console's browser for tests/integration/console.rs (scripts/console/install.sh: Debian's chromium and chromium-driver, when missing)"
bash scripts/console/install.sh

step "cargo test (PostgreSQL and SQLite)"
cargo test --workspace --locked --all-targets -- --test-threads="${TEST_THREADS:-4}"

# In the background, while the fuzzer runs on the debug binary: the Docker image's build
# stage on a copy of exactly what it copies (scripts/docker-check.py: the release profile,
# thin LTO, about 5 minutes on both cores), then the README's Run command (cargo run --release),
# which finds that release build done (cargo's artifacts do not depend on where the
# workspace lies, and the copy holds the same tracked files). SKIP_DOCKER_CHECK=1 skips the
# first; the README's command then builds the release profile itself. Their output is
# printed when the fuzzer is done.
bg_dir=$(mktemp -d)
(
  if [ "${SKIP_DOCKER_CHECK:-0}" = 1 ]; then
    echo "SKIP_DOCKER_CHECK=1: the Docker image's build stage was not checked" >"$bg_dir/docker.log"
    echo 0 >"$bg_dir/docker.rc"
  else
    rc=0; python3 scripts/docker-check.py >"$bg_dir/docker.log" 2>&1 || rc=$?
    echo "$rc" >"$bg_dir/docker.rc"
  fi
  rc=0; bash scripts/readme-run.sh >"$bg_dir/readme.log" 2>&1 || rc=$?
  echo "$rc" >"$bg_dir/readme.rc"
) &
bg_pid=$!
trap 'kill "$bg_pid" 2>/dev/null || true; rm -rf "$bg_dir"' EXIT

step "fuzzing every route of the OpenAPI document (schemathesis)"
fuzz_rc=0
bash scripts/fuzz.sh || fuzz_rc=$?

wait "$bg_pid" || true
step "the Docker image without Docker (scripts/docker-check.py: its build stage on a copy of what it copies, its command and health check)"
cat "$bg_dir/docker.log" >&2
docker_rc=$(cat "$bg_dir/docker.rc" 2>/dev/null || echo 1)
step "the README's Run command, as written (cargo run --release -- serve --help)"
cat "$bg_dir/readme.log" >&2
readme_rc=$(cat "$bg_dir/readme.rc" 2>/dev/null || echo 1)
trap - EXIT
rm -rf "$bg_dir"
[ "$fuzz_rc" -eq 0 ] || { echo "fuzzing failed" >&2; exit 1; }
[ "$docker_rc" -eq 0 ] || { echo "the Docker image's check failed" >&2; exit 1; }
[ "$readme_rc" -eq 0 ] || { echo "the README's Run command failed" >&2; exit 1; }

# A failure of the PostgreSQL failover suite is reported at the end: the real-Flink suites run anyway.
patroni_rc=0
if [ "${SKIP_PATRONI:-0}" = 1 ]; then
  step "SKIP_PATRONI=1: the PostgreSQL failover suite was not run"
else
  step "jobstore on a real PostgreSQL HA cluster (Patroni, etcd, HAProxy), both replication modes"
  python3 tests/patroni/run.py || patroni_rc=$?
fi
patroni_verdict() { [ "$patroni_rc" -eq 0 ] || { echo "the PostgreSQL failover suite failed" >&2; exit 1; }; }

if [ "${SKIP_FLINK:-0}" = 1 ]; then
  step "SKIP_FLINK=1: the real-Flink suites were not run"
  patroni_verdict
  exit 0
fi

step "the suites on a real Flink 2.3.0 (pytest): the harness, savepoints, the lifecycle, the HA plugin standalone, on ZooKeeper and as the whole HA backend"
flink_rc=0
bash scripts/flink-tests.sh || flink_rc=$?

# A Flink job on the plugin's jobstore HA mode through PostgreSQL failovers shorter and longer
# than the lease (tests/patroni/flink_failover.py, about 2 minutes), on the Flink installed above.
if [ "${SKIP_PATRONI:-0}" != 1 ]; then
  step "a Flink job on jobstore HA through PostgreSQL failovers (Patroni, synchronous mode)"
  python3 tests/patroni/run.py --modes sync flink || patroni_rc=$?
fi
patroni_verdict
exit "$flink_rc"
