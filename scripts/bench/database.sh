# Sourced by the pgbench scripts of this folder (pgbench.sh, batch-floor.sh), from the
# checkout's root: PostgreSQL's connection defaults (PGHOST/PGPORT/PGUSER: 127.0.0.1, 5432,
# postgres), Flink's result files ($DATA: the copy in tests/data, or ../shared's), Debian's
# pgbench as $PGBENCH, and `fresh_database PREFIX`, which creates a
# database PREFIX_<random> ($db) with migrations/postgres applied and a scratch folder
# ($work), both removed when the script exits (also on an error or Ctrl-C).

export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
DATA="${DATA:-tests/data/flink-2.3.0/job-result-store}"
[ -d "$DATA" ] || DATA=../shared/flink-reference/job-result-store
PGBENCH="$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -n1 || true)"
if [ -z "$PGBENCH" ]; then
  echo "pgbench is missing: apt-get install -y postgresql-client (Debian ships it there)" >&2
  exit 1
fi

cleanup() {
  dropdb --if-exists --force "$db" 2>/dev/null && echo "dropped database $db" >&2
  rm -rf "$work"
}

fresh_database() {
  db="$1_$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
  work="$(mktemp -d)"
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  createdb "$db"
  echo "database: $db" >&2
  local f
  for f in $(ls migrations/postgres/V*__*.sql | sort -V); do
    psql -q -v ON_ERROR_STOP=1 -d "$db" -f "$f" >/dev/null
  done
}
