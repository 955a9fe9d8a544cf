#!/usr/bin/env python3
"""Small JSON/HTTP helpers for flink-ha-plugin/test.sh (standard library only).

Usage: lib.py COMMAND ARGS...  (exit 0 = yes/ok, 1 = no/mismatch with a reason on stderr)
Env: JOBSTORE_TOKEN  sent as "Authorization: Bearer ..." with every request

  get URL                         print the body of GET URL (exit 1 unless 200)
  status URL                      print the HTTP status of GET URL
  field URL FIELD[.SUB...]        print a field of the JSON at URL ("" when absent)
  wait-state URL STATE TIMEOUT    poll an entry until its "state" is STATE
  held PROXY                      print how many mark-clean requests the proxy holds now
  compare-job ENTRY_URL FLINK_URL JOB   check the stored result against Flink's execution-result
  compare-app ENTRY_URL FLINK_URL APP   check the stored application result against Flink
  compare-failure ENTRY_URL FLINK_URL JOB TEXT   check a FAILED result and its failure-cause
  ids URL KEY ID_FIELD            print the sorted ids of a listing (all pages)
  run-with-id FLINK_URL JAR JOB_ID ARGS...  submit JAR with a fixed job id; print the job id,
                                  or "REJECTED: <first cause>" (exit 3) when Flink refuses it
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid


def http(method, url, body=None, headers=None, timeout=30):
    headers = dict(headers or {})
    if os.environ.get("JOBSTORE_TOKEN"):  # jobstore's read token; Flink ignores the header
        headers.setdefault("Authorization", "Bearer " + os.environ["JOBSTORE_TOKEN"])
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get_json(url):
    status, body = http("GET", url)
    if status != 200:
        raise SystemExit(f"GET {url} -> {status}: {body[:300]!r}")
    return json.loads(body)


def dig(obj, path):
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def cmd_get(url):
    status, body = http("GET", url)
    sys.stdout.write(body.decode())
    sys.exit(0 if status == 200 else 1)


def cmd_status(url):
    try:
        status, _ = http("GET", url, timeout=5)
    except Exception:
        status = 0
    print(status)


def cmd_field(url, path):
    status, body = http("GET", url)
    if status != 200:
        print("")
        sys.exit(1)
    v = dig(json.loads(body), path)
    print("" if v is None else (json.dumps(v) if isinstance(v, (dict, list)) else v))


def cmd_wait_state(url, state, timeout):
    deadline = time.time() + float(timeout)
    last = None
    while time.time() < deadline:
        try:
            status, body = http("GET", url, timeout=5)
            last = json.loads(body).get("state") if status == 200 else f"HTTP {status}"
        except Exception as e:  # jobstore may be restarting
            last = repr(e)
        if last == state:
            return
        time.sleep(0.2)
    fail(f"{url}: state {last!r}, wanted {state!r} within {timeout}s")


def cmd_held(proxy):
    print(get_json(proxy + "/__proxy/held")["waiting"])


def flink_result(flink, job):
    r = get_json(f"{flink}/jobs/{job}/execution-result")
    if dig(r, "status.id") != "COMPLETED":
        fail(f"execution-result of {job} not COMPLETED: {r}")
    return r["job-execution-result"]


def cmd_compare_job(entry_url, flink, job):
    entry = get_json(entry_url)
    stored, reported = entry["result"], flink_result(flink, job)
    problems = []
    for k in ("id", "name", "application-status", "net-runtime"):
        if stored.get(k) != reported.get(k):
            problems.append(f"{k}: stored {stored.get(k)!r}, Flink {reported.get(k)!r}")
    if entry.get("job-id") != job:
        problems.append(f"job-id {entry.get('job-id')!r}")
    if stored != reported:
        diff = sorted(k for k in set(stored) | set(reported) if stored.get(k) != reported.get(k))
        problems.append(f"whole result differs in {diff}")
    if problems:
        fail("; ".join(problems))
    print(f"id={stored['id']} name={stored['name']} status={stored['application-status']} "
          f"net-runtime={stored['net-runtime']} (all {len(stored)} fields equal)")


def cmd_compare_app(entry_url, flink, app):
    entry = get_json(entry_url)
    stored = entry["result"]
    reported = get_json(f"{flink}/applications/{app}")
    problems = []
    pairs = (("application-id", "id"), ("application-name", "name"),
             ("application-state", "status"), ("end-time", "end-time"))
    for mine, theirs in pairs:
        if stored.get(mine) != reported.get(theirs):
            problems.append(f"{mine}: stored {stored.get(mine)!r}, Flink {reported.get(theirs)!r}")
    if entry.get("application-id") != app:
        problems.append(f"application-id {entry.get('application-id')!r}")
    if problems:
        fail("; ".join(problems))
    print(f"application-id={stored['application-id']} state={stored['application-state']} "
          f"name={stored['application-name']}")


def cmd_compare_failure(entry_url, flink, job, text):
    entry = get_json(entry_url)
    stored, reported = entry["result"], flink_result(flink, job)
    problems = []
    if stored.get("application-status") != "FAILED":
        problems.append(f"application-status {stored.get('application-status')!r}")
    cause, flink_cause = stored.get("failure-cause"), reported.get("failure-cause")
    if not isinstance(cause, dict):
        problems.append("no failure-cause stored")
    else:
        if cause != flink_cause:
            diff = sorted(k for k in set(cause) | set(flink_cause or {})
                          if cause.get(k) != (flink_cause or {}).get(k))
            problems.append(f"failure-cause differs from Flink's in {diff}")
        if text not in cause.get("stack-trace", ""):
            problems.append(f"stack-trace lacks {text!r}")
    if problems:
        fail("; ".join(problems))
    print(f"status=FAILED class={cause['class']} stack-trace={len(cause['stack-trace'])} chars "
          f"(failure-cause equals Flink's)")


def cmd_ids(url, key, id_field):
    ids, after = [], None
    while True:
        page = get_json(url + ("&" if "?" in url else "?") + "limit=2"
                        + (f"&after={after}" if after else ""))
        ids += [e[id_field] for e in page[key]]
        after = page.get("next")
        if not after:
            break
    print(" ".join(sorted(ids)))


def cmd_run_with_id(flink, jar, job_id, *args):
    boundary = uuid.uuid4().hex
    with open(jar, "rb") as f:
        data = f.read()
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"jarfile\"; "
            f"filename=\"{os.path.basename(jar)}\"\r\nContent-Type: application/java-archive\r\n\r\n"
            ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    status, resp = http("POST", f"{flink}/jars/upload", body,
                        {"Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout=120)
    if status != 200:
        fail(f"upload: HTTP {status} {resp[:300]!r}")
    jar_id = os.path.basename(json.loads(resp)["filename"])
    run = json.dumps({"programArgsList": list(args), "jobId": job_id}).encode()
    status, resp = http("POST", f"{flink}/jars/{jar_id}/run", run,
                        {"Content-Type": "application/json"}, timeout=120)
    if status == 200:
        print(json.loads(resp)["jobid"])
        return
    text = json.loads(resp).get("errors", [""])[0]
    causes = [l.strip() for l in text.split("\n") if l.startswith("Caused by:")]
    print("REJECTED: " + (causes[-1] if causes else text.split("\n")[0]))
    sys.exit(3)


COMMANDS = {
    "get": cmd_get, "status": cmd_status, "field": cmd_field, "wait-state": cmd_wait_state,
    "held": cmd_held, "compare-job": cmd_compare_job, "compare-app": cmd_compare_app,
    "compare-failure": cmd_compare_failure, "ids": cmd_ids, "run-with-id": cmd_run_with_id,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
