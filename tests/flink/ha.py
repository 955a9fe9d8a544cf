"""What the HA suites share: a pair of JobManagers started, a leader failover timed against
checkpoints, the same on Flink's own ZooKeeper HA (ZooKeeperBaseline: the baseline of the
failover figures), `flink list -r` through the client HA services, a job's entry in jobstore
through the API and in SQL, the jobstore replica a JobManager's plugin uses, fatal errors in a
JobManager's log, the figures written to BENCH_OUT."""
import glob
import json
import os
import re
import subprocess
import time

from flink import LEADER_LINE
from harness import expect, get_json, http, log, status_of, wait_for


def completed_checkpoints(ckdir, job):
    return sorted(int(os.path.basename(os.path.dirname(m))[4:])
                  for m in glob.glob(os.path.join(ckdir, job, "chk-*", "_metadata")))


def latest_checkpoint(ckdir, job):
    return (completed_checkpoints(ckdir, job) or [0])[-1]


def start_pair(cluster, what):
    """Starts a cluster of two JobManagers (one leads, the standby answers on its REST port,
    every TaskManager registered): (leader, standby, what to report)."""
    log(f"starting {cluster.name}: {what}")
    leader = cluster.start()
    standby = cluster.others(leader)[0]
    return leader, standby, f"{what}: leader {leader.name}, REST {leader.rest}"


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


class ZooKeeperBaseline:
    """Flink's own `high-availability.type: zookeeper` (2 JobManagers, 1 TaskManager, on the run's
    ZooKeeper) with conf over the defaults, the probe job with checkpoints, the leader SIGKILLed:
    a suite's steps call start, job_runs, kill, restored, then stop; figures() after kill."""

    def __init__(self, ctx, name, conf):
        zk = ctx.zookeeper()
        self.ckdir = ctx.path(f"checkpoints-{name}")
        self.cluster = ctx.cluster(name, dict({
            "high-availability.type": "zookeeper",
            "high-availability.zookeeper.quorum": zk.quorum,
            "high-availability.zookeeper.path.root": "/flink",
            "high-availability.cluster-id": f"{name}-{os.urandom(3).hex()}",
            "high-availability.storageDir": f"file://{ctx.path('ha-' + name)}",
            "execution.checkpointing.dir": f"file://{self.ckdir}",
            "execution.checkpointing.num-retained": "1",
        }, **conf), jobmanagers=2)
        self.leader = self.job = self.result = None

    def start(self, what):
        self.leader, _, detail = start_pair(self.cluster, what)
        return detail

    def job_runs(self):
        self.job = probe_job(self.cluster, self.leader, self.ckdir)
        return f"job {self.job}"

    def kill(self):
        self.result = failover(self.cluster, self.job, self.ckdir)
        _, new, _, t_leader, t_running, _ = self.result
        return f"{new.name} leads {t_leader:.1f}s after the kill, job RUNNING after {t_running:.1f}s"

    def restored(self):
        return restored_from(self.cluster, self.job, self.result[1], self.result[2])

    def stop(self):
        self.cluster.stop()

    def figures(self):
        """{leader_answering_s, job_running_s, load, negotiated_session_timeout_ms, granted_s}."""
        old, new, _, t_leader, t_running, load = self.result
        negotiated = re.findall(r"negotiated timeout = (\d+)", old.log_text())
        granted = line_time(new, LEADER_LINE)
        return {"leader_answering_s": round(t_leader, 1), "job_running_s": round(t_running, 1), "load": round(load, 2),
                "negotiated_session_timeout_ms": int(negotiated[-1]) if negotiated else None,
                # the timeline: the standby's resource manager granted leadership (its log), after the kill
                "granted_s": round(granted - self.cluster.killed_at, 2) if granted else None}


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


# --- jobstore's HA mode: the JobManagers' terms (their logs), the lease (SQL, HA routes) -------------
# (tests/flink/test_plugin_jobstore.py and tests/patroni/flink_failover.py)

LEADS = re.compile(r"JobManager (\S+) leads cluster (\S+) now: epoch (\d+)")
GIVES_UP = re.compile(r"JobManager (\S+) gives up the leadership of cluster (\S+) \(epoch (\d+)\): (.*)")
COMPETES = re.compile(r"Competing for the leadership of cluster (\S+) in jobstore as (\S+) ")
RECEIVED = re.compile(r"Received task .* \((\w+)_(\w+)_(\d+)_(\d+)\), deploy into slot")
FREED = re.compile(r"Freeing task resources for .* \((\w+)_(\w+)_(\d+)_(\d+)\)\.")

AUDIT = """
CREATE TABLE suite_ha_audit (at timestamptz NOT NULL DEFAULT clock_timestamp(), tbl text NOT NULL,
                             op text NOT NULL, cluster_id text NOT NULL, component text, epoch bigint NOT NULL,
                             expires_at timestamptz);
CREATE FUNCTION suite_ha_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO suite_ha_audit (tbl, op, cluster_id, component, epoch, expires_at)
    VALUES (TG_TABLE_NAME, TG_OP, NEW.cluster_id, to_jsonb(NEW) ->> 'component', NEW.epoch,
            (to_jsonb(NEW) ->> 'expires_at')::timestamptz);
    RETURN NULL;
END;
$$;
CREATE TRIGGER suite_ha_audit AFTER INSERT OR UPDATE ON ha_leases FOR EACH ROW EXECUTE FUNCTION suite_ha_audit();
CREATE TRIGGER suite_ha_audit AFTER INSERT OR UPDATE ON ha_leader_info FOR EACH ROW EXECUTE FUNCTION suite_ha_audit();
"""


def terms(jm, cid):
    """The JobManager's terms in this start of it, in order: ("leads" | "gives up", epoch, time, line)."""
    out = []
    for line in jm.log_text().splitlines():
        for kind, rx in (("leads", LEADS), ("gives up", GIVES_UP)):
            m = rx.search(line)
            if m and m.group(2) == cid:
                out.append((kind, int(m.group(3)), log_time(line), line.split(" - ", 1)[-1]))
    return out


def epoch_led(jm, cid):
    """The epoch this JobManager leads with by its log, 0 when it does not lead."""
    t = terms(jm, cid)
    return t[-1][1] if jm.alive() and t and t[-1][0] == "leads" else 0


def holder(jm, cid):
    m = COMPETES.search(jm.log_text())
    expect(m and m.group(1) == cid, f"{jm.name} did not log that it competes for cluster {cid}")
    return m.group(2)


def task_sets(tm, since):
    """From the TaskManager's log: the most attempts of one subtask alive at once (received, not
    yet freed) at or after `since`, and how many attempts were received at or after it."""
    alive, most, received = {}, 0, 0
    for line in tm.log_text().splitlines():
        m = RECEIVED.search(line) or FREED.search(line)
        if not m:
            continue
        attempts = alive.setdefault((m.group(2), m.group(3)), set())
        attempt = "_".join(m.groups())
        t = log_time(line) or 0
        if m.re is RECEIVED:
            attempts.add(attempt)
            received += t >= since
        else:
            attempts.discard(attempt)
        if t >= since:
            most = max(most, max(len(v) for v in alive.values()))
    return most, received


class Js:
    """Reads the cluster's HA data in jobstore: SQL on the database, the HA routes on a replica."""

    def __init__(self, db, cid, url):
        self.db, self.cid, self.url = db, cid, url

    def lease(self):
        """ha_leaders: (holder, epoch, live, acquired_at, expires_at) (times as time.time())."""
        row = self.db.sql(f"SELECT holder || '|' || epoch || '|' || live::int || '|' || extract(epoch FROM leader_since) "
                          f"|| '|' || extract(epoch FROM expires_at) FROM ha_leaders WHERE cluster_id = '{self.cid}'")
        expect(row, f"no row of cluster {self.cid} in ha_leaders")
        h, e, live, since, until = row.split("|")
        return h, int(e), live == "1", float(since), float(until)

    def last_lease_write(self):
        """When (time.time() scale) the cluster's lease row was last written: the audit trigger's
        record of the latest acquisition or renewal."""
        return float(self.db.sql(f"SELECT coalesce(extract(epoch FROM max(at)), 0) FROM suite_ha_audit "
                                 f"WHERE tbl = 'ha_leases' AND cluster_id = '{self.cid}'"))

    def lease_expiry(self, epoch):
        """The latest expiry (time.time() scale) the database recorded for the cluster's lease in an
        epoch: the audit trigger's record of its acquisition and every renewal that committed."""
        return float(self.db.sql(f"SELECT coalesce(extract(epoch FROM max(expires_at)), 0) FROM suite_ha_audit "
                                 f"WHERE tbl = 'ha_leases' AND cluster_id = '{self.cid}' AND epoch = {int(epoch)}"))

    def ha(self, path):
        return get_json(f"{self.url}/v1/clusters/{self.cid}/ha/{path}", timeout=10)

    def checkpoint_ids(self, job):
        """The ids of the job's checkpoints whose pointers jobstore holds (not marked for deletion)."""
        return sorted(int(h["name"].rsplit("-", 1)[-1]) for h in self.ha(f"state-handles/checkpoint?job={job}")["state-handles"]
                      if not h["marked-for-deletion"])

    def latest_held(self, job):
        """The id of the latest checkpoint held for the job, in SQL (also while jobstore cannot reach
        the database: the suite's psql goes to it directly)."""
        name = self.db.sql(f"SELECT max(name) FROM ha_state_handles WHERE cluster_id = '{self.cid}' "
                           f"AND kind = 'checkpoint' AND job_id = '{job}' AND NOT marked_for_deletion")
        return int(name.rsplit("-", 1)[-1]) if name else 0

    def job_rows(self, job):
        """(execution plans, checkpoints, counters, leader information) rows of the job, in SQL."""
        c, j = self.cid, job
        row = self.db.sql(
            f"SELECT (SELECT count(*) FROM ha_state_handles WHERE cluster_id = '{c}' AND kind = 'execution-plan' "
            f"AND name = '{j}') || '|' || (SELECT count(*) FROM ha_state_handles WHERE cluster_id = '{c}' "
            f"AND kind = 'checkpoint' AND job_id = '{j}') || '|' || (SELECT count(*) FROM ha_counters "
            f"WHERE cluster_id = '{c}' AND job_id = '{j}') || '|' || (SELECT count(*) FROM ha_leader_info "
            f"WHERE cluster_id = '{c}' AND component = '{j}')")
        return tuple(int(x) for x in row.split("|"))
