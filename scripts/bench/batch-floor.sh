#!/usr/bin/env bash
# PostgreSQL's own ceiling for jobstore's create+clean cycles, without jobstore: the group
# commit's batch statement (src/store/sql/postgres_only/results_batch.sql), each in a
# transaction of its own, run back to back by pgbench, prepared. Each transaction creates N
# job results (Flink's smallest result file, a fresh id each) and marks clean the N that the
# same connection's previous transaction created: one flush of 2N writers in step (N
# creates, N mark-cleans). A shape CxN runs C such connections at once: C flushes in flight,
# 2CN writers. The planner settings of the batch's transaction (BEGIN_INDEX_LOOKUPS_ONLY in
# src/store/group_commit.rs) are set once per session instead of in every transaction, and
# nothing else runs (no HTTP, no jobstore): an upper bound for what jobstore's flushes could
# reach on this server, one durable commit per transaction (BENCHMARKS.md).
#
#   bash scripts/bench/batch-floor.sh                 # SHAPES="1x4 2x2 1x16 2x8", 8 s each
#   SHAPES="1x4" DURATION=20 bash scripts/bench/batch-floor.sh
#
# It creates a fresh database jobstore_floor_<random>, applies migrations/postgres, and
# drops the database at the end (also on error or Ctrl-C). Needs pgbench and python3, as
# scripts/bench/pgbench.sh. PGHOST/PGPORT/PGUSER default to 127.0.0.1/5432/postgres.
set -euo pipefail
cd "$(dirname "$0")/../.."

SHAPES="${SHAPES:-1x4 2x2 1x16 2x8}"
DURATION="${DURATION:-8}"

source scripts/bench/database.sh
fresh_database jobstore_floor

# One pgbench script per N: the batch statement with its arrays spelled out; ids from the
# connection's id and its counter n (this transaction's creates: n, its mark-cleans: n - 1).
# The settings of BEGIN_INDEX_LOOKUPS_ONLY go to PGOPTIONS ($work/options).
sizes="$(for s in $SHAPES; do echo "${s#*x}"; done | sort -un)"
python3 - "$DATA" "$work" $sizes <<'PY'
import json, os, re, sys
data, work, sizes = sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3:]]
files = sorted((os.path.getsize(os.path.join(data, f)), f) for f in os.listdir(data) if f.endswith('.json'))
result = json.load(open(os.path.join(data, files[0][1])))['result']
text = json.dumps(result, separators=(',', ':')).replace(result['id'], 'IDX')
sql = open('src/store/sql/postgres_only/results_batch.sql').read()
sql = ' '.join(' '.join(l for l in sql.splitlines() if not l.startswith('--')).split())
begin = open('src/store/group_commit.rs').read()
begin = re.search(r'BEGIN_INDEX_LOOKUPS_ONLY: &str = "(.*?)";', begin, re.S).group(1)
settings = re.findall(r'SET LOCAL (\w+) = (\w+)', begin)
assert settings, 'no settings in BEGIN_INDEX_LOOKUPS_ONLY'
open(os.path.join(work, 'options'), 'w').write(' '.join(f'-c {k}={v}' for k, v in settings))

def array(items):
    return 'ARRAY[' + ','.join(items) + ']::text[]'

def ids(n, counter):
    return [f"md5(:client_id::text || '-' || ({counter})::text || '-{k}')" for k in range(n)]

for n in sizes:
    arrays = {
        'job_create_clusters': array(["'floor'"] * n),
        'job_create_ids': array(ids(n, ':n')),
        'job_create_states': array(["'dirty'"] * n),
        'job_create_results': array([f"replace('{text}', 'IDX', {i})" for i in ids(n, ':n')]),
        'job_clean_clusters': array(["'floor'"] * n),
        'job_clean_ids': array(ids(n, ':n - 1')),
    }
    s = sql
    for name, value in arrays.items():
        s = s.replace(f':{name}::text[]', value)
    s = re.sub(r':application_[a-z_]+::text\[\]', 'ARRAY[]::text[]', s)
    assert not re.search(r':[a-z_]+::text\[\]', s), 'a parameter left'
    with open(os.path.join(work, f'n{n}.sql'), 'w') as f:
        f.write('\\set n :n + 1\nBEGIN;\n' + s + ';\nCOMMIT;\n')
PY

echo "| shape | connections | rows per transaction | writers | transactions/s | cycles/s | left dirty |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for shape in $SHAPES; do
  c="${shape%x*}" n="${shape#*x}"
  out="$(PGOPTIONS="$(cat "$work/options")" "$PGBENCH" -n -M prepared -c "$c" -j "$c" \
    -T "$DURATION" -D n=0 -f "$work/n$n.sql" -d "$db" 2>&1)" || {
    echo "$out" >&2
    exit 1
  }
  tps="$(echo "$out" | awk '/^tps/ {print $3}')"
  dirty="$(psql -At -d "$db" -c "SELECT count(*) FROM job_results WHERE state = 'dirty'")"
  psql -q -d "$db" -c "TRUNCATE job_results" >/dev/null
  awk -v s="$shape" -v c="$c" -v n="$n" -v t="$tps" -v d="$dirty" \
    'BEGIN { printf "| %s | %d | %d + %d | %d | %.0f | %.0f | %d |\n", s, c, n, n, 2 * c * n, t, t * n, d }'
done
