#!/usr/bin/env bash
# Runs the suites that use a real Flink 2.3.0 (tests/flink/test_*.py) with pytest and
# pytest-xdist, which it installs from PyPI into .flink/pytest-venv (git ignores it) on first use.
# Two lanes (xdist workers) side by side: the suites that use ZooKeeper in one, the others in
# the other; -n 0 runs every suite in this process, one after the other (with -s: its log live).
#
# Usage: scripts/flink-tests.sh [PYTEST ARGS]     (none: every suite)
#        scripts/flink-tests.sh -k plugin_zookeeper
#        scripts/flink-tests.sh tests/flink/test_lifecycle.py -x -n 0 -s
# What the suites show, their steps and stories, and their environment (JOBSTORE_BIN,
# JOBSTORE_FLINK_CACHE, PG*, KEEP_SCRATCH, BENCH_OUT, NO_LATER_GATE): tests/flink/conftest.py.
# Needs python3 with venv, Java 17 and psql; PostgreSQL at DATABASE_URL or PGHOST/PGPORT/PGUSER.
# PYTEST_VENV: another folder for the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES="pytest==9.2.0 pytest-xdist==3.8.0 execnet==2.1.2"
VENV="$(realpath -m "${PYTEST_VENV:-.flink/pytest-venv}")"

if [ "$(cat "$VENV/.jobstore-packages" 2>/dev/null)" != "$PACKAGES" ]; then
  echo "installing $PACKAGES into $VENV" >&2
  python3 -m venv "$VENV"
  # shellcheck disable=SC2086 # one word a package
  "$VENV/bin/pip" install --quiet --disable-pip-version-check $PACKAGES
  echo "$PACKAGES" >"$VENV/.jobstore-packages"
fi

# No __pycache__ in the checkout. The root is the checkout's: node ids read
# tests/flink/test_savepoints.py::test_..., and without a path pytest runs tests/flink.
export PYTHONDONTWRITEBYTECODE=1
exec "$VENV/bin/python" -m pytest -c tests/flink/pytest.ini --rootdir=. -o cache_dir="$PWD/.flink/pytest-cache" \
  -n 2 "$@"
