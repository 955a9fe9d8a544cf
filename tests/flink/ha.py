"""What the HA suites share: a leader failover timed against checkpoints, a job's entry in
jobstore through the API and in SQL, the jobstore replica a JobManager's plugin uses, fatal
errors in a JobManager's log."""
import glob
import json
import os
import re
import time

from harness import expect, http, log, status_of, wait_for


def completed_checkpoints(ckdir, job):
    return sorted(int(os.path.basename(os.path.dirname(m))[4:])
                  for m in glob.glob(os.path.join(ckdir, job, "chk-*", "_metadata")))


def latest_checkpoint(ckdir, job):
    return (completed_checkpoints(ckdir, job) or [0])[-1]


def failover(cluster, job, ckdir):
    """Kills the leader right after a checkpoint: (old, new, latest checkpoint id, seconds until
    the standby answers as leader, seconds until the job runs again)."""
    old = cluster.leader()
    expect(old is not None, "no single leader before the kill")
    base = latest_checkpoint(ckdir, job)
    wait_for("a new checkpoint completes", lambda: latest_checkpoint(ckdir, job) > base, 60, 0.1)
    time.sleep(0.5)
    latest = latest_checkpoint(ckdir, job)
    survivor = cluster.others(old)[0]
    t0 = time.time()
    old.kill()
    log(f"{cluster.name}: SIGKILL leader {old.name} (pid {old.proc.pid}) after checkpoint {latest}")
    wait_for("the standby leads", lambda: survivor.leads() and status_of(survivor.rest + "/jobs/overview") == 200, 180, 0.1)
    t_leader = time.time() - t0
    wait_for(f"job {job} RUNNING again on {survivor.name}", lambda: cluster.job_running(job, survivor), 240, 0.2)
    return old, survivor, latest, t_leader, time.time() - t0


def entry(js_url, cluster_id, job):
    status, body = http("GET", f"{js_url}/v1/clusters/{cluster_id}/job-results/{job}")
    return json.loads(body) if status == 200 else None


def api_state(js_url, cluster_id, job, state, status):
    e = entry(js_url, cluster_id, job)
    expect(e, "no entry")
    got = (e.get("state"), e["result"].get("application-status"))
    expect(got == (state, status), f"entry is {got}, wanted {(state, status)}")
    return f"API: state={got[0]} application-status={got[1]}"


def wait_api_state(js_url, cluster_id, job, state, status, timeout):
    wait_for(state, lambda: (entry(js_url, cluster_id, job) or {}).get("state") == state, timeout)
    return api_state(js_url, cluster_id, job, state, status)


def sql_state(db, cluster_id, job, state, status):
    row = db.sql(f"SELECT state || '|' || (result->>'application-status') FROM job_results "
                 f"WHERE cluster_id = '{cluster_id}' AND job_id = '{job}'")
    expect(row == f"{state}|{status}", f"SQL row is {row!r}, wanted {state}|{status}")
    return f"SQL: {row}"


def in_use_replica(jm):
    """The replica the JobManager's plugin logged last as in use (or switched to)."""
    best = None
    for line in jm.log_text().splitlines():
        m = re.search(r"Using jobstore replica (\S+) \(|switching to replica (\S+)$", line)
        if m:
            best = m.group(1) or m.group(2)
    return best


def no_fatal(jm):
    bad = jm.fatal_lines()
    expect(not bad, bad[0][:300] if bad else "")
    return f"no fatal error in {jm.name}'s log"
