"""What the HA suites share: a leader failover timed against checkpoints, the same on Flink's
own ZooKeeper HA (the baseline of the failover figures), `flink list -r` through the client HA
services, a job's entry in jobstore through the API and in SQL, the jobstore replica a
JobManager's plugin uses, fatal errors in a JobManager's log."""
import glob
import json
import os
import re
import subprocess
import time

from flink import LEADER_LINE
from harness import expect, http, log, status_of, wait_for


def completed_checkpoints(ckdir, job):
    return sorted(int(os.path.basename(os.path.dirname(m))[4:])
                  for m in glob.glob(os.path.join(ckdir, job, "chk-*", "_metadata")))


def latest_checkpoint(ckdir, job):
    return (completed_checkpoints(ckdir, job) or [0])[-1]


def start_pair(ctx, cluster, what):
    """Starts a cluster of two JobManagers (a required check: one leads, every TaskManager
    registered), then waits until the standby's REST endpoint answers: (leader, standby)."""
    log(f"starting {cluster.name}: {what}")
    ctx.require(f"{what}: 2 JobManagers and 1 TaskManager up, one leads",
                lambda: (lambda j: f"leader {j.name}, REST {j.rest}")(cluster.start()))
    leader = cluster.leader()
    standby = cluster.others(leader)[0]
    wait_for(f"{cluster.name}: the standby's REST endpoint answers", lambda: status_of(standby.rest + "/overview") == 200,
             120)
    return leader, standby


def probe_job(cluster, jm, ckdir):
    """Submits the checkpointed unbounded probe job (50 records/s, a checkpoint every second),
    waits until it runs and 2 checkpoints completed: the job id."""
    job = cluster.submit(0, 50, "probe-ha", 0, -1, 1000, jm=jm)
    wait_for(f"job {job} RUNNING", lambda: cluster.job_running(job, jm), 120)
    wait_for("2 checkpoints", lambda: latest_checkpoint(ckdir, job) >= 2, 90)
    return job


def failover(cluster, job, ckdir, settled=None):
    """Kills the leader right after a checkpoint: (old, new, latest checkpoint id, seconds until
    the standby answers as leader, seconds until the job runs again, the 1-minute load average
    at the kill). settled(id): true once checkpoint `id` is where the standby will look for it
    (default: half a second after its _metadata file was written). The kill's time (time.time())
    is left in cluster.killed_at, for timelines from the logs."""
    old = cluster.leader()
    expect(old is not None, "no single leader before the kill")
    base = latest_checkpoint(ckdir, job)
    wait_for("a new checkpoint completes", lambda: latest_checkpoint(ckdir, job) > base, 60, 0.05)
    if settled:
        latest = wait_for("the new checkpoint settles", lambda: (
            lambda c: c if settled(c) and latest_checkpoint(ckdir, job) == c else None)(latest_checkpoint(ckdir, job)),
            30, 0.05)
    else:
        time.sleep(0.5)
        latest = latest_checkpoint(ckdir, job)
    survivor = cluster.others(old)[0]
    load = os.getloadavg()[0]
    t0 = cluster.killed_at = time.time()
    old.kill()
    log(f"{cluster.name}: SIGKILL leader {old.name} (pid {old.proc.pid}) after checkpoint {latest}")
    wait_for("the standby leads", lambda: survivor.leads() and status_of(survivor.rest + "/jobs/overview") == 200, 180, 0.1)
    t_leader = time.time() - t0
    wait_for(f"job {job} RUNNING again on {survivor.name}", lambda: cluster.job_running(job, survivor), 240, 0.2)
    return old, survivor, latest, t_leader, time.time() - t0, load


def restored_from(cluster, job, jm, latest):
    """Flink's checkpoint statistics name `latest` as the checkpoint the job was restored from."""
    stats = wait_for("restored checkpoint in the statistics",
                     lambda: (cluster.checkpoints(job, jm).get("latest") or {}).get("restored"), 60)
    expect(stats.get("id") == latest and not stats.get("is_savepoint"),
           f"restored {stats}, latest completed before was {latest}")
    return f"restored checkpoint {stats['id']} = the latest completed before"


def checkpoints_continue(ckdir, job, after, timeout=60):
    nxt = wait_for(f"a checkpoint after {after}", lambda: [c for c in completed_checkpoints(ckdir, job) if c > after],
                   timeout)[0]
    return f"next completed checkpoint id {nxt} > {after}"


def check_recovery(ctx, label, cluster, job, ckdir, old, new, latest):
    """The checks after a failover from `old` to `new`: the job restored from `latest`, the
    checkpoint ids go on, and `flink list -r` with the killed JobManager's configuration finds it."""
    ctx.check(f"{label} the job was restored from the latest checkpoint before the kill (Flink's latest.restored.id)",
              restored_from, cluster, job, new, latest)
    ctx.check(f"{label} checkpoint ids continue after the restore", checkpoints_continue, ckdir, job, latest)
    ctx.check(f"{label} flink list -r with the killed JobManager's configuration finds the job (client HA services)",
              flink_list, cluster.flink, old, job, os.path.join(cluster.dir, "cli-log"))


def flink_list(flink, jm, job, log_dir):
    """`flink list -r` with a (killed) JobManager's config.yaml, whose rest.port is dead: only the
    mode's client HA services can lead the CLI to the leader. The line of the running job."""
    os.makedirs(log_dir, exist_ok=True)
    env = dict(os.environ, FLINK_CONF_DIR=os.path.join(jm.dir, "conf"), FLINK_LIB_DIR=os.path.join(jm.dir, "lib"),
               FLINK_LOG_DIR=log_dir)
    r = subprocess.run([os.path.join(flink.home, "bin", "flink"), "list", "-r"], capture_output=True, text=True,
                       env=env, timeout=180)
    line = [x for x in r.stdout.splitlines() if job in x]
    expect(r.returncode == 0 and line and "RUNNING" in line[0], f"exit {r.returncode}: {(r.stdout + r.stderr)[-400:]}")
    return f"rest.port {jm.rest_port} of {jm.name} is dead, the CLI found the leader: '{line[0].strip()}'"


def zookeeper_failover(ctx, name, label, conf):
    """Flink's own `high-availability.type: zookeeper` (2 JobManagers, 1 TaskManager, on the run's
    ZooKeeper), the probe job with checkpoints, the leader SIGKILLed: its checks prefixed with
    label; the figures {leader_answering_s, job_running_s, load} or None; the cluster stopped."""
    zk = ctx.zookeeper()
    ckdir = ctx.path(f"checkpoints-{name}")
    cluster = ctx.cluster(name, dict({
        "high-availability.type": "zookeeper",
        "high-availability.zookeeper.quorum": zk.quorum,
        "high-availability.zookeeper.path.root": "/flink",
        "high-availability.cluster-id": f"{name}-{os.urandom(3).hex()}",
        "high-availability.storageDir": f"file://{ctx.path('ha-' + name)}",
        "execution.checkpointing.dir": f"file://{ckdir}",
        "execution.checkpointing.num-retained": "1",
    }, **conf), jobmanagers=2)
    leader, _ = start_pair(ctx, cluster, f"{label} Flink's own high-availability.type zookeeper")
    job = ctx.require(f"{label} the same checkpointed job runs, 2 checkpoints", probe_job, cluster, leader, ckdir)
    box = []

    def kill():
        box.append(failover(cluster, job, ckdir))
        _, new, latest, t_leader, t_running, _ = box[0]
        return f"{new.name} leads {t_leader:.1f}s after the kill, job RUNNING after {t_running:.1f}s"
    ctx.check(f"{label} SIGKILL of the leader, the standby takes over, the job runs again", kill)
    if box:
        ctx.check(f"{label} the job was restored from its latest checkpoint", restored_from, cluster, job, box[0][1],
                  box[0][2])
    cluster.stop()
    if not box:
        return None
    negotiated = re.findall(r"negotiated timeout = (\d+)", box[0][0].log_text())
    granted = line_time(box[0][1], LEADER_LINE)
    return {"leader_answering_s": round(box[0][3], 1), "job_running_s": round(box[0][4], 1), "load": round(box[0][5], 2),
            "negotiated_session_timeout_ms": int(negotiated[-1]) if negotiated else None,
            # the timeline: the standby's resource manager granted leadership (its log), after the kill
            "granted_s": round(granted - cluster.killed_at, 2) if granted else None}


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def log_time(line):
    """The time (time.time() scale) of a Flink log line, None when it has none."""
    m = LOG_TIME.match(line)
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000 if m else None


def line_time(jm, text, after=0):
    """The time of the first line of the JobManager's log (this start of it) that holds text and
    was logged at or after `after`; None when there is none."""
    for line in jm.log_text().splitlines():
        if text in line:
            t = log_time(line)
            if t is not None and t >= after:
                return t
    return None


def write_bench(suite, figures):
    """BENCH_OUT=FILE: the suite's figures go into FILE's JSON object under the suite's name
    (with the time of the run), beside those of the other suites."""
    path = os.environ.get("BENCH_OUT")
    if not path:
        return
    try:
        with open(path) as f:
            data = json.load(f)
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[suite] = dict(figures, at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


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
