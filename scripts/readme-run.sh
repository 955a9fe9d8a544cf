#!/usr/bin/env bash
# Runs the README's first command (the first ```sh block under "## Run") exactly as written,
# with `--help` appended, from the checkout's root, as a new user would on a fresh clone.
# Fails when the command does not run (e.g. cargo cannot tell which binary to run) or when
# its help is not serve's.
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=$(awk '/^## Run$/{run=1; next} run && /^```sh$/{block=1; next} block && /^```$/{exit} block{print}' README.md)
if [ -z "$cmd" ] || [ "$(printf '%s\n' "$cmd" | wc -l)" -ne 1 ]; then
  echo "README.md: expected one command in the first sh block under '## Run', got: $cmd" >&2
  exit 1
fi
echo "README's Run command: $cmd --help" >&2
out=$(bash -c "$cmd --help" 2>&1) || { printf '%s\n' "$out" >&2; echo "the README's Run command failed" >&2; exit 1; }
for flag in --database-url --listen; do
  grep -q -- "$flag" <<<"$out" || { printf '%s\n' "$out" >&2; echo "its help does not list $flag: not serve's" >&2; exit 1; }
done
echo "ok: the README's Run command runs" >&2
