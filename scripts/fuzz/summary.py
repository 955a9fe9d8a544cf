"""Reads one backend's schemathesis JSON report and the hook's tally; prints one line and
writes `<generated> <with_failures> <responses> <5xx> <checked> <stored>` for fuzz.sh."""

import json
import sys

backend, report_path, stats_path, out_path = sys.argv[1:5]
report = json.load(open(report_path))
stats = json.load(open(stats_path))
cases = report["test_cases"]
server_errors = sum(n for code, n in stats["statuses"].items() if code.startswith("5"))
failures = ", ".join(
    f"{f['code']} {f['title']} x{f['count']}: {'; '.join(f['operations'][:4])}"
    for f in report.get("failures", [])
)
print(
    f"fuzz {backend}: {cases['generated']} cases generated, {cases['with_failures']} with "
    f"failures, {cases['errored']} errored; {stats['responses']} requests, answers "
    f"{dict(sorted(stats['statuses'].items()))}; 5xx: {server_errors}; rejected writes "
    f"checked for nothing stored: {stats['rejected_writes_checked']}, of which changed the "
    f"store: {stats['stored_by_rejected']}"
    + (f"\n  failures: {failures}" if failures else "")
)
with open(out_path, "w") as f:
    f.write(
        f"{cases['generated']} {cases['with_failures'] + cases['errored']} {stats['responses']} "
        f"{server_errors} {stats['rejected_writes_checked']} {stats['stored_by_rejected']}\n"
    )
