#!/usr/bin/env bash
# Runs the suites that use a real Flink 2.3.0 (tests/flink/test_*.py) with pytest, which it
# installs from PyPI into .flink/pytest-venv (git ignores it) on first use.
#
# Usage: scripts/flink-tests.sh [PYTEST ARGS]     (none: every suite)
#        scripts/flink-tests.sh -k plugin_zookeeper
#        scripts/flink-tests.sh tests/flink/test_lifecycle.py -x
# What the suites show, their steps and stories, and their environment (JOBSTORE_BIN,
# JOBSTORE_FLINK_CACHE, PG*, KEEP_SCRATCH, BENCH_OUT, NO_LATER_GATE): tests/flink/conftest.py.
# Needs python3 with venv, Java 17 and psql; PostgreSQL at DATABASE_URL or PGHOST/PGPORT/PGUSER.
# PYTEST_VENV: another folder for the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTEST_VERSION=9.2.0
VENV="$(realpath -m "${PYTEST_VENV:-.flink/pytest-venv}")"

if ! "$VENV/bin/python" -m pytest --version 2>/dev/null | grep -qx "pytest $PYTEST_VERSION"; then
  echo "installing pytest $PYTEST_VERSION into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "pytest==$PYTEST_VERSION"
fi

# No __pycache__ in the checkout; the suites' output as it comes (-v: each step and its detail).
export PYTHONDONTWRITEBYTECODE=1
if [ "$#" -eq 0 ]; then
  set -- tests/flink
fi
exec "$VENV/bin/python" -m pytest -c tests/flink/pytest.ini -o cache_dir="$PWD/.flink/pytest-cache" "$@"
