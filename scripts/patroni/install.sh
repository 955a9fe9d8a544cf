#!/usr/bin/env bash
# Installs what the PostgreSQL HA suite (tests/patroni) runs: Debian's patroni, etcd-server and
# haproxy. A no-op when their binaries are there; non-interactive. PostgreSQL 15's binaries are
# expected at /usr/lib/postgresql/15/bin (the machine's own PostgreSQL package).
set -euo pipefail

missing=()
command -v patroni >/dev/null 2>&1 && command -v patronictl >/dev/null 2>&1 || missing+=(patroni)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
echo "installing ${missing[*]} (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# --no-install-recommends: patroni recommends its own PostgreSQL packages, not needed here.
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for bin in patroni patronictl etcd haproxy; do
  command -v "$bin" >/dev/null 2>&1 || { echo "install.sh: $bin is still missing" >&2; exit 1; }
done
