"""Schemathesis hooks of scripts/fuzz.sh (loaded through SCHEMATHESIS_HOOKS=hooks).

- Tallies every answer by status into the JSON file FUZZ_STATS (written at exit), so that
  the script can print how many requests were sent and how many 5xx came back.
- Registers the check `nothing_stored_by_a_rejected_write`: a POST, PUT or DELETE answered
  4xx must leave the store as it was. The store's state is fingerprinted before each call
  and after a rejected write, from the service's own counts (`/metrics`: entries per kind,
  cluster and state; savepoint operations per cluster and status) and `GET /v1/clusters`.
  It needs one worker (`--workers 1`), so that no other request runs in between.
- Caps the long polls of `GET .../ha/leader-info` and `GET .../ha/lease` at 500 ms (a numeric
  `wait-ms` above it is sent as 500): with `If-None-Match` naming the current state they wait
  by design for the whole `wait-ms` (up to 28 s), longer than the fuzzer's request timeout.
  The waiting itself is tested by tests/integration/ha_changes.rs and ha_failover.rs;
  malformed and out-of-range values are still sent as generated.
"""

import atexit
import json
import os
import urllib.request

import schemathesis

BASE = os.environ["FUZZ_BASE"].rstrip("/")
STATS_PATH = os.environ.get("FUZZ_STATS")
WRITES = {"POST", "PUT", "DELETE", "PATCH"}

stats = {"responses": 0, "statuses": {}, "rejected_writes_checked": 0, "stored_by_rejected": 0}
state = {"before": None}


def _get(path):
    with urllib.request.urlopen(BASE + path, timeout=20) as r:
        return r.read().decode("utf-8", "replace")


def fingerprint():
    lines = [
        line
        for line in _get("/metrics").splitlines()
        if line.startswith("jobstore_results{") or line.startswith("jobstore_savepoint_operations{")
    ]
    return "\n".join(sorted(lines)) + "\n" + _get("/v1/clusters")


LONG_POLL_CAP_MS = 500


@schemathesis.hook
def before_call(context, case, **kwargs):
    wait = (case.query or {}).get("wait-ms")
    if case.path.endswith(("/ha/leader-info", "/ha/lease")) and isinstance(wait, (int, str)) and str(wait).isdigit() \
            and LONG_POLL_CAP_MS < int(wait) <= 60000:
        case.query["wait-ms"] = str(LONG_POLL_CAP_MS)
    if case.method.upper() in WRITES:
        state["before"] = fingerprint()


@schemathesis.hook
def after_call(context, case, response):
    stats["responses"] += 1
    code = str(response.status_code)
    stats["statuses"][code] = stats["statuses"].get(code, 0) + 1


@schemathesis.check
def nothing_stored_by_a_rejected_write(ctx, response, case):
    if case.method.upper() not in WRITES or not 400 <= response.status_code < 500:
        return None
    before = state["before"]
    if before is None:
        return None
    stats["rejected_writes_checked"] += 1
    after = fingerprint()
    if after != before:
        stats["stored_by_rejected"] += 1
        raise AssertionError(
            f"{case.method} {case.path} was answered {response.status_code} but changed the store"
        )
    return None


@atexit.register
def _dump():
    if STATS_PATH:
        with open(STATS_PATH, "w") as f:
            json.dump(stats, f)
