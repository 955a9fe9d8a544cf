#!/usr/bin/env bash
# pgbench running the SQL that jobstore runs, on the same PostgreSQL server, as the
# reference for jobstore-bench (BENCHMARKS.md):
#   cycle:  INSERT a dirty job result with a unique id, then UPDATE it clean (two commits),
#           95% small Flink results, 5% the one with the 36 KB failure-cause;
#   status: the savepoint status poll's point select by primary key.
# It creates a fresh database jobstore_pgbench_<random>, applies migrations/postgres, and
# drops the database at the end (also on error or Ctrl-C).
#
#   bash scripts/bench/pgbench.sh                      # C = 1 8 32, 5 s each
#   CLIENTS="8" DURATION=10 bash scripts/bench/pgbench.sh
#
# Needs pgbench (Debian: apt-get install postgresql-client or postgresql-contrib) and
# python3 (to extract the payloads). PGHOST/PGPORT/PGUSER default to 127.0.0.1/5432/postgres.
set -euo pipefail
cd "$(dirname "$0")/../.."

CLIENTS="${CLIENTS:-1 8 32}"
DURATION="${DURATION:-5}"
NOPS="${NOPS:-1000}"
LARGE_PERCENT="${LARGE_PERCENT:-5}"

source scripts/bench/database.sh
fresh_database jobstore_pgbench
psql -q -v ON_ERROR_STOP=1 -v nops="$NOPS" -d "$db" -f scripts/bench/setup.sql >/dev/null

# The `result` objects of Flink's files: the smallest one and the largest one.
small="$(python3 - "$DATA" small <<'PY'
import json, os, sys
d = sys.argv[1]
files = sorted((os.path.getsize(os.path.join(d, f)), f) for f in os.listdir(d) if f.endswith('.json'))
f = files[0][1] if sys.argv[2] == 'small' else files[-1][1]
print(json.dumps(json.load(open(os.path.join(d, f)))['result'], separators=(',', ':')))
PY
)"
large="$(python3 - "$DATA" large <<'PY'
import json, os, sys
d = sys.argv[1]
files = sorted((os.path.getsize(os.path.join(d, f)), f) for f in os.listdir(d) if f.endswith('.json'))
f = files[0][1] if sys.argv[2] == 'small' else files[-1][1]
print(json.dumps(json.load(open(os.path.join(d, f)))['result'], separators=(',', ':')))
PY
)"

# Percentiles of pgbench's per-transaction log (third field: latency in microseconds).
percentiles() {
  cat "$@" | awk '{print $3}' | sort -n | awk '
    { v[NR] = $1 }
    END {
      if (NR == 0) { print "- / - / -"; exit }
      split("0.50 0.99 0.999", q, " ")
      out = ""
      for (i = 1; i <= 3; i++) {
        k = int(q[i] * NR + 0.999999); if (k < 1) k = 1; if (k > NR) k = NR
        out = out (i > 1 ? " / " : "") sprintf("%.2f", v[k] / 1000)
      }
      print out
    }'
}

run() { # name clients args...
  local name="$1" c="$2"; shift 2
  local j=$(( c < 2 ? c : 2 ))
  local out="$work/out-$name-$c.txt"
  "$PGBENCH" -n -M prepared -c "$c" -j "$j" -T "$DURATION" -l --log-prefix="$work/$name-$c" \
    "$@" "$db" >"$out" 2>&1 || { cat "$out" >&2; return 1; }
  local tps failed
  tps="$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")"
  failed="$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")"
  printf '| %s | %s | %.0f | %s | %s |\n' "$name" "$c" "$tps" \
    "$(percentiles "$work/$name-$c".*)" "${failed:-0}"
}

echo
echo "$("$PGBENCH" --version), $(psql -d "$db" -Atc "select split_part(version(), ',', 1) || ', synchronous_commit=' || current_setting('synchronous_commit')"), ${DURATION}s per cell, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| workload | C | transactions/s | latency p50 / p99 / p99.9 ms | failed |"
echo "|---|---:|---:|---|---:|"
for c in $CLIENTS; do
  run cycle "$c" -f scripts/bench/create_clean_small.sql@$((100 - LARGE_PERCENT)) \
    -f scripts/bench/create_clean_large.sql@"$LARGE_PERCENT" -D small="$small" -D large="$large"
done
for c in $CLIENTS; do
  run status "$c" -f scripts/bench/status.sql -D nops="$NOPS"
done
echo
echo "(a cycle transaction is the INSERT and the UPDATE, each its own commit; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
