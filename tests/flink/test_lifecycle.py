"""The savepoint lifecycle through jobstore on a real Flink 2.3.0 session cluster.

Flink's own command-line client talks to jobstore (`flink savepoint -m`, `flink savepoint -d`,
`flink stop -m`, all `/v1` paths): the savepoint path it prints exists, the disposed folder is
gone, the stopped job is FINISHED; on a cluster reached through `--cluster-listen` whose
flink-rest-url is not Flink's REST root (Flink answers the trigger 404), the CLI prints
jobstore's own failure (its serialized-throwable decoded by Flink's client). A checkpoint through jobstore completes with the checkpoint id Flink
reports. A schedule of a few seconds saves two running jobs once per due time; a retention of 2
disposes of the older savepoints through Flink (their folders gone from disk) and keeps the
newest; latest-savepoint, by job and by name, names the newest. One jobstore on PostgreSQL, one
Flink cluster (one JobManager, one TaskManager), two unbounded jobs.
"""
import json
import os
import re

import pytest

from harness import Fail, Proc, expect, free_port, http, log, snippet, wait_for

SAVED = re.compile(r"Savepoint completed\. Path: (\S+)")


def local(location):
    """The folder of a `file:` location."""
    expect(location and location.startswith("file:"), f"not a file: location: {location!r}")
    return re.sub(r"^file:(//)?", "", location)


def on_disk(location):
    return os.path.isfile(os.path.join(local(location), "_metadata"))


class Suite:
    def __init__(self, ctx, cluster, store, listen_port):
        self.ctx = ctx
        self.cluster = cluster
        self.store = store
        self.listen_port = listen_port
        self.jobs = []
        self.cli_runs = 0
        self.cli_savepoint = None

    # --- jobstore ---

    def api(self, method, path, body=None, want=200):
        status, answer = http(method, self.store.url + path, body)
        expect(status == want, f"{method} {path}: HTTP {status}, expected {want}: {snippet(answer)}")
        return json.loads(answer) if answer else None

    def operations(self, query=""):
        return self.api("GET", f"/v1/clusters/default/savepoint-operations?limit=1000&{query}")["savepoint-operations"]

    def savepoints_of(self, job):
        """Completed savepoints of a job (every savepoint kind), oldest first."""
        ops = [op for op in self.operations(f"job-id={job}&status=COMPLETED")
               if op["kind"] not in ("CHECKPOINT", "DISPOSAL") and op.get("location")]
        return sorted(ops, key=lambda op: op["completed-at"])

    # --- Flink's CLI ---

    def cli(self, *args, timeout=180):
        """`flink ARGS` with the distribution's own client configuration; (exit status, output).
        Stopped by its pid when it does not end in time."""
        flink = self.ctx.flink()
        conf = self.ctx.path("cli-conf")
        if not os.path.isdir(conf):
            os.makedirs(conf)
            with open(os.path.join(flink.home, "conf", "config.yaml")) as src, \
                    open(os.path.join(conf, "config.yaml"), "w") as dst:
                dst.write(src.read())
        self.cli_runs += 1
        env = dict(os.environ, FLINK_CONF_DIR=conf, FLINK_LOG_DIR=self.ctx.path(f"cli-log-{self.cli_runs}"))
        for k in ("FLINK_EXTRA_CONF", "FLINK_ENV_JAVA_OPTS", "FLINK_ENV_JAVA_OPTS_CLI"):
            env.pop(k, None)
        log(f"flink {' '.join(args)}")
        p = Proc(f"flink-cli-{self.cli_runs}", [os.path.join(flink.home, "bin", "flink"), *args],
                 self.ctx.path(f"cli-{self.cli_runs}.out"), env=env)
        try:
            p.p.wait(timeout=timeout)
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
            p.term()
            raise Fail(f"flink {' '.join(args)} did not end within {timeout} s: {snippet(p.log_text(), 1500)}")
        rc = p.term()
        return rc, p.log_text()

    def jobstore_address(self):
        return self.store.url.removeprefix("http://")


# --- checks --------------------------------------------------------------------------------------

def chk_cli_savepoint(s, job, folder):
    rc, out = s.cli("savepoint", "-m", s.jobstore_address(), job, f"file://{folder}")
    expect(rc == 0, f"exit {rc}: {snippet(out, 2500)}")
    m = SAVED.search(out)
    expect(m, f"no 'Savepoint completed. Path:' in the output: {snippet(out, 2500)}")
    path = m.group(1)
    expect(local(path).startswith(folder + "/"), f"{path} is not under {folder}")
    expect(on_disk(path), f"no _metadata in {path}")
    listed = [op for op in s.savepoints_of(job) if op["location"] == path]
    expect(len(listed) == 1 and listed[0]["trigger"] == "api",
           f"jobstore does not list the CLI's savepoint {path}: {snippet(json.dumps(s.savepoints_of(job)), 800)}")
    s.cli_savepoint = path
    return f"{path}, listed by jobstore"


def chk_cli_failure(s, job):
    """The cluster behind --cluster-listen names a path of Flink's REST server that is not its
    root: Flink answers the trigger 404, jobstore completes the operation with its own
    failure-cause, and Flink's client prints jobstore's class and message."""
    rc, out = s.cli("savepoint", "-m", f"127.0.0.1:{s.listen_port}", job)
    expect(rc == 1, f"exit {rc}, expected 1: {snippet(out, 2500)}")
    for text in ("jobstore.FlinkRequestRejectedException", "Flink refused the savepoint request"):
        expect(text in out, f"the CLI does not print {text!r}: {snippet(out, 3000)}")
    expect("TimeoutException" not in out, f"the CLI could not decode the answer: {snippet(out, 3000)}")
    ops = s.api("GET", f"/v1/clusters/elsewhere/savepoint-operations?job-id={job}")["savepoint-operations"]
    expect(len(ops) == 1 and ops[0]["failure-cause"]["class"] == "jobstore.FlinkRequestRejectedException",
           f"cluster elsewhere's operations: {snippet(json.dumps(ops), 800)}")
    line = next(x for x in out.splitlines() if "jobstore.FlinkRequestRejectedException" in x)
    return line.strip()[:200]


def chk_cli_dispose(s):
    path = s.cli_savepoint
    rc, out = s.cli("savepoint", "-m", s.jobstore_address(), "-d", path)
    expect(rc == 0, f"exit {rc}: {snippet(out, 2500)}")
    expect(f"Savepoint '{path}' disposed." in out, f"no 'disposed' line: {snippet(out, 2000)}")
    expect(not os.path.exists(local(path)), f"{local(path)} is still on disk")
    disposals = [op for op in s.operations("kind=DISPOSAL") if op.get("savepoint-path") == path]
    expect(len(disposals) == 1 and disposals[0]["failure-cause"] is None,
           f"disposal operations: {snippet(json.dumps(disposals), 800)}")
    marked = [op for op in s.operations() if op.get("location") == path]
    expect(marked and marked[0]["disposed-at"], f"the savepoint is not marked disposed: {snippet(json.dumps(marked), 600)}")
    return f"{path} gone, its operation disposed-at {marked[0]['disposed-at']}"


def chk_checkpoint(s, job):
    answer = s.api("POST", f"/v1/jobs/{job}/checkpoints", {"checkpointType": "FULL"}, want=202)
    rid = answer["request-id"]

    def done():
        st = s.api("GET", f"/v1/jobs/{job}/checkpoints/{rid}")
        return st["operation"] if st["status"]["id"] == "COMPLETED" else None
    op = wait_for(f"checkpoint {rid} COMPLETED through jobstore", done, 90, 0.3)
    expect(set(op) == {"checkpointId"}, f"not a checkpoint id: {op}")
    cid = op["checkpointId"]
    status, theirs = http("GET", f"{s.cluster.rest}/jobs/{job}/checkpoints/{rid}")
    expect(status == 200 and json.loads(theirs).get("operation") == op,
           f"Flink's answer for trigger {rid}: HTTP {status} {snippet(theirs)}")
    history = s.cluster.checkpoints(job).get("history") or []
    mine = [c for c in history if c.get("id") == cid]
    expect(mine and mine[0].get("status") == "COMPLETED",
           f"checkpoint {cid} is not COMPLETED in Flink's history: {snippet(json.dumps(history), 800)}")
    listed = [o for o in s.operations("kind=CHECKPOINT") if o["request-id"] == rid]
    expect(listed and listed[0]["checkpoint-id"] == cid, f"listing: {snippet(json.dumps(listed), 500)}")
    return f"checkpoint {cid}, Flink reports it COMPLETED ({mine[0].get('checkpoint_type')})"


def chk_schedule(s):
    s.api("PUT", "/v1/clusters/default/savepoint-schedule", {"interval": "3s"})

    def enough():
        per_job = {j: [op for op in s.savepoints_of(j) if op["trigger"] == "schedule"] for j in s.jobs}
        return per_job if all(len(v) >= 3 for v in per_job.values()) else None
    per_job = wait_for("three scheduled savepoints of each running job", enough, 120, 1)
    s.api("DELETE", "/v1/clusters/default/savepoint-schedule", want=204)
    wait_for("the scheduled savepoints in flight completed", lambda: not s.operations("status=IN_PROGRESS"), 60, 0.5)
    for job, ops in per_job.items():
        dues = [op["due-at"] for op in ops]
        expect(len(set(dues)) == len(dues), f"two operations of one due time for {job}: {dues}")
        for op in ops:
            expect(on_disk(op["location"]), f"no _metadata in {op['location']}")
    counts = ", ".join(f"{len(v)} of {j[:8]}" for j, v in per_job.items())
    return f"{counts}, one per due time, on disk"


def chk_retention(s):
    s.api("PUT", "/v1/clusters/default/savepoint-retention", {"max-count": 2})

    def settled():
        out = {}
        for job in s.jobs:
            kept = [op for op in s.savepoints_of(job) if not op["disposed-at"]]
            if len(kept) != 2:
                return None
            out[job] = kept
        return out
    kept = wait_for("every job down to its 2 newest savepoints", settled, 120, 1)
    by_retention = [op for op in s.operations("kind=DISPOSAL") if op["trigger"] == "retention"]
    expect(all(op["status"] == "COMPLETED" and op["failure-cause"] is None for op in by_retention),
           f"disposals: {snippet(json.dumps(by_retention), 800)}")
    paths = {op["savepoint-path"] for op in by_retention}
    for job in s.jobs:
        older = [op for op in s.savepoints_of(job) if op["disposed-at"] and op["location"] != s.cli_savepoint]
        expect(older, f"retention disposed of no savepoint of {job}")
        for op in older:
            expect(op["location"] in paths, f"{op['location']} disposed of, but not by the retention")
            expect(not os.path.exists(local(op["location"])), f"{op['location']} was disposed of but is still on disk")
    for job, ops in kept.items():
        newest = max(s.savepoints_of(job), key=lambda op: op["completed-at"])
        expect(newest in ops, f"the newest savepoint of {job} was disposed of")
        for op in ops:
            expect(on_disk(op["location"]), f"kept savepoint {op['location']} is not on disk")
    s.api("DELETE", "/v1/clusters/default/savepoint-retention", want=204)
    return f"{len(by_retention)} savepoints disposed of by the retention (folders gone), the 2 newest of each job kept"


def chk_latest(s, job, name):
    newest = max(s.savepoints_of(job), key=lambda op: op["completed-at"])
    latest = s.api("GET", f"/v1/clusters/default/jobs/{job}/latest-savepoint")
    expect(latest["location"] == newest["location"], f"latest {latest['location']}, newest {newest['location']}")
    by_name = s.api("GET", f"/v1/clusters/default/latest-savepoint?job-name={name}")
    expect(by_name["location"] == newest["location"], f"by name: {by_name['location']}")
    expect(on_disk(latest["location"]), f"{latest['location']} is not on disk")
    return latest["location"]


def chk_cli_stop(s, job, folder):
    rc, out = s.cli("stop", "-m", s.jobstore_address(), "--savepointPath", f"file://{folder}", job)
    expect(rc == 0, f"exit {rc}: {snippet(out, 2500)}")
    m = SAVED.search(out)
    expect(m, f"no 'Savepoint completed. Path:' in the output: {snippet(out, 2500)}")
    expect(on_disk(m.group(1)), f"no _metadata in {m.group(1)}")
    s.cluster.wait_job(job, "FINISHED", 60)
    latest = s.api("GET", f"/v1/clusters/default/jobs/{job}/latest-savepoint")
    expect(latest["location"] == m.group(1) and latest["kind"] == "STOP_WITH_SAVEPOINT",
           f"latest-savepoint after the stop: {snippet(json.dumps(latest), 500)}")
    return f"{m.group(1)}, job FINISHED, the latest savepoint"


# --- the steps -------------------------------------------------------------------------------------

NAMES = {"a": "jobstore-lifecycle-a", "b": "jobstore-lifecycle-b"}
jobs = pytest.mark.parametrize("job", list(NAMES))


@pytest.mark.required
def test_flink_cluster_starts(ctx, s):
    s.cluster, s.sp_dir, detail = ctx.session_cluster({"execution.checkpointing.dir": f"file://{ctx.path('checkpoints')}"})
    return detail


@pytest.mark.required
def test_jobstore_serve_starts(ctx, s):
    """PostgreSQL, --cluster-listen elsewhere=..."""
    db = ctx.postgres.create_database("jobstore_lifecycle")
    listen_port = free_port()
    store = ctx.jobstore("jobstore", db.url(), [
        "--cluster-id", "default", "--flink-rest-url", s.cluster.rest, "--savepoint-dir", f"file://{s.sp_dir}",
        "--poll-interval", "200ms", "--retry-backoff", "1s", "--cluster-listen", f"elsewhere=127.0.0.1:{listen_port}"])
    s.lc = Suite(ctx, s.cluster, store, listen_port)
    return store.start()


@pytest.mark.required
def test_cluster_elsewhere_configured(s):
    """Cluster elsewhere: a path of Flink's REST server that is not its root."""
    s.lc.api("PUT", "/v1/clusters/elsewhere", {"flink-rest-url": s.cluster.rest + "/no-such-root",
                                               "savepoint-directory": f"file://{s.sp_dir}"})


@pytest.mark.required
def test_two_unbounded_jobs_submitted(s):
    s.lc.jobs = [s.cluster.submit(0, 20, name, 100) for name in NAMES.values()]
    s.job = dict(zip(NAMES, s.lc.jobs))
    return " ".join(s.lc.jobs)


@jobs
@pytest.mark.required
def test_job_running(s, job):
    s.cluster.wait_job(s.job[job], "RUNNING", 120)
    return s.job[job]


def test_cli_savepoint(ctx, s):
    """flink savepoint -m <jobstore> JOB DIR: exit 0, prints the path, _metadata on disk,
    jobstore lists it."""
    return chk_cli_savepoint(s.lc, s.job["a"], ctx.path("sp-cli"))


def test_cli_savepoint_on_cluster_whose_flink_answers_404(s):
    """flink savepoint -m <--cluster-listen of a cluster whose Flink answers 404>: exit 1, the CLI
    prints jobstore's own failure (FlinkRequestRejectedException) from its serialized-throwable."""
    return chk_cli_failure(s.lc, s.job["a"])


def test_cli_dispose(s):
    """flink savepoint -m <jobstore> -d PATH: exit 0, 'disposed', the folder gone, the savepoint
    marked disposed."""
    return chk_cli_dispose(s.lc)


def test_checkpoint_through_jobstore(s):
    """POST /v1/jobs/JOB/checkpoints FULL through jobstore: COMPLETED with the checkpoint id Flink
    reports."""
    return chk_checkpoint(s.lc, s.job["a"])


def test_schedule(s):
    """A 3 s savepoint schedule: savepoints of both running jobs, one per due time, on disk."""
    return chk_schedule(s.lc)


def test_retention(s):
    """Retention max-count 2: older savepoints disposed of through Flink (folders gone), the 2
    newest kept."""
    return chk_retention(s.lc)


@jobs
def test_latest_savepoint(s, job):
    """latest-savepoint of the job (by job and by name) is its newest savepoint, on disk."""
    return chk_latest(s.lc, s.job[job], NAMES[job])


def test_cli_stop(ctx, s):
    """flink stop -m <jobstore> --savepointPath DIR JOB: exit 0, the path on disk, the job
    FINISHED, latest-savepoint names it."""
    return chk_cli_stop(s.lc, s.job["b"], ctx.path("sp-stop"))
