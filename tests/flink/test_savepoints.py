"""Savepoint operations through jobstore on a real Flink 2.3.0 session cluster.

jobstore (`serve --flink-rest-url ... --savepoint-dir ...`) drives savepoints and
stop-with-savepoint on Flink with its own request-id as Flink's triggerId, stores Flink's location
or failure-cause verbatim, and keeps answering after a jobstore restart and after Flink forgot the
operation (JobManager restart). Every check runs on PostgreSQL and on SQLite, against one Flink
cluster (one JobManager, one TaskManager, no default savepoint directory) and one unbounded job
per backend (20 records/s, snapshotState sleeps 1 s so that an operation is IN_PROGRESS long
enough to be seen). The steps of the two backends alternate (the [postgres] and the [sqlite]
step of each check); before the JobManager restart PostgreSQL's jobstore is stopped (it starts
again after it) and SQLite's keeps running.
"""
import json
import os
import re
import time

import pytest

from harness import Fail, expect, http, log, random_hex, snippet

HEX32 = re.compile(r"[0-9a-f]{32}")


class Backend:
    """One backend's jobstore, its Flink job, and every operation created through it:
    request-id -> (kind, outcome: "location" | "failure", COMPLETED answer or None)."""

    def __init__(self, ctx, label, database_url, job, flink_url, sp_dir):
        self.label = label
        self.job = job
        self.flink_url = flink_url
        self.sp_dir = sp_dir
        self.ops = {}
        self.jobstore = ctx.jobstore(f"jobstore-{label}", database_url, [
            "--cluster-id", "default", "--flink-rest-url", flink_url,
            "--savepoint-dir", f"file://{sp_dir}", "--poll-interval", "200ms"])

    @property
    def url(self):
        return self.jobstore.url

    def status(self, rid):
        return http("GET", f"{self.url}/jobs/{self.job}/savepoints/{rid}")

    def flink_status(self, rid):
        return http("GET", f"{self.flink_url}/jobs/{self.job}/savepoints/{rid}")

    def trigger(self, path, body, kind, outcome):
        """POST through jobstore; 202 with a request-id, recorded. Returns the request-id."""
        status, answer = http("POST", f"{self.url}/jobs/{self.job}/{path}", body)
        expect(status == 202, f"POST /jobs/{self.job}/{path} {json.dumps(body)}: HTTP {status} {snippet(answer)}")
        rid = json.loads(answer).get("request-id")
        expect(isinstance(rid, str) and HEX32.fullmatch(rid), f"202 without a request-id: {snippet(answer)}")
        self.ops[rid] = (kind, outcome, None)
        return rid

    def await_op(self, rid):
        """Polls jobstore's status until COMPLETED (90 s) and keeps that answer; returns whether
        an IN_PROGRESS answer (exactly Flink's shape) was seen first."""
        saw_in_progress = False
        deadline = time.time() + 90
        answer = b""
        while time.time() < deadline:
            status, answer = self.status(rid)
            expect(status == 200, f"GET {self.url}/jobs/{self.job}/savepoints/{rid}: HTTP {status} {snippet(answer)}")
            j = json.loads(answer)
            state = (j.get("status") or {}).get("id")
            if state == "IN_PROGRESS":
                expect(j == {"status": {"id": "IN_PROGRESS"}, "operation": None},
                       f'IN_PROGRESS answer is not {{"status":{{"id":"IN_PROGRESS"}},"operation":null}}: {snippet(answer)}')
                saw_in_progress = True
            elif state == "COMPLETED":
                kind, outcome, _ = self.ops[rid]
                self.ops[rid] = (kind, outcome, j)
                return saw_in_progress
            else:
                raise Fail(f"unexpected status answer: {snippet(answer)}")
            time.sleep(0.1)
        raise Fail(f"operation {rid} not COMPLETED through jobstore within 90s (last: {snippet(answer)})")

    def completed(self, rid):
        return self.ops[rid][2]

    def verify_location(self, rid):
        """The COMPLETED answer has a location under --savepoint-dir with a _metadata file on
        disk, and Flink answers 200 COMPLETED with the same location for the same trigger id (so
        Flink ran the savepoint under jobstore's request-id)."""
        done = self.completed(rid)
        loc = (done.get("operation") or {}).get("location")
        expect(loc, f"COMPLETED without a location: {snippet(json.dumps(done), 1500)}")
        expect(loc.startswith("file:/"), f"location is not file:/...: {loc}")
        path = loc[len("file:"):]
        expect(path.startswith(self.sp_dir + "/"), f"location {loc} is not under the --savepoint-dir file://{self.sp_dir}")
        expect(os.path.isfile(os.path.join(path, "_metadata")), f"no {path}/_metadata on disk (location {loc})")
        status, answer = self.flink_status(rid)
        expect(status == 200, f"Flink does not know trigger id {rid} (GET {self.flink_url}/jobs/{self.job}/savepoints/{rid}: "
                              f"HTTP {status} {snippet(answer, 200)})")
        theirs = (json.loads(answer).get("operation") or {}).get("location")
        expect(theirs == loc, f"Flink's answer for {rid} differs from jobstore's: Flink {snippet(answer, 300)}, jobstore {loc}")
        log(f"{rid}: {loc} (Flink agrees)")
        return loc

    def same_answers(self):
        """Every operation answers exactly its saved COMPLETED body."""
        for rid in self.ops:
            status, answer = self.status(rid)
            expect(status == 200, f"GET /jobs/{self.job}/savepoints/{rid}: HTTP {status} {snippet(answer)}")
            before = self.completed(rid)
            expect(before is not None, f"{rid} never completed before, now: {snippet(answer)}")
            expect(json.loads(answer) == before,
                   f"{rid} answers {snippet(answer, 300)}, before: {snippet(json.dumps(before), 300)}")
        return f"{len(self.ops)} operations answer as before"


# --- checks --------------------------------------------------------------------------------------

def chk_savepoint(b, body, want):
    """A savepoint through jobstore on the running job; want: the expected request-id or None."""
    rid = b.trigger("savepoints", body, "SAVEPOINT", "location")
    expect(want is None or rid == want, f"request-id {rid} is not the triggerId {want}")
    saw = b.await_op(rid)
    expect(saw, f"operation {rid} was never IN_PROGRESS through jobstore (snapshot sleeps 1 s)")
    return b.verify_location(rid)


def chk_stop(b, cluster):
    """Stop-with-savepoint through jobstore: COMPLETED with a location, the job FINISHED."""
    rid = b.trigger("stop", {"drain": False}, "STOP_WITH_SAVEPOINT", "location")
    b.await_op(rid)
    loc = b.verify_location(rid)
    try:
        cluster.wait_job(b.job, "FINISHED", 60)
    except Fail as e:
        raise Fail(f"Flink job {b.job} is not FINISHED after the stop: {e}") from None
    status, answer = http("GET", f"{b.flink_url}/jobs/{b.job}/status")
    expect(status == 200 and json.loads(answer).get("status") == "FINISHED",
           f"Flink GET /jobs/{b.job}/status: HTTP {status} {snippet(answer)}")
    return loc


def chk_finished_job(b):
    """A savepoint of the FINISHED job: COMPLETED with Flink's own failure-cause, verbatim."""
    status, answer = http("GET", f"{b.flink_url}/jobs/{b.job}/status")
    expect(status == 200 and json.loads(answer).get("status") == "FINISHED",
           f"precondition: Flink job {b.job} is not FINISHED: HTTP {status} {snippet(answer)}")
    rid = b.trigger("savepoints", {}, "SAVEPOINT", "failure")
    b.await_op(rid)
    done = b.completed(rid)
    op = done.get("operation") or {}
    fc = op.get("failure-cause")
    expect(set(op) == {"failure-cause"} and isinstance(fc, dict),
           f"COMPLETED without (only) a failure-cause: {snippet(json.dumps(done), 600)}")
    expect("FlinkJobNotFoundException" in fc.get("class", "") + fc.get("stack-trace", ""),
           f"failure-cause does not mention FlinkJobNotFoundException: {snippet(json.dumps(done), 600)}")
    expect(not fc.get("class", "").startswith("jobstore."),
           f"failure-cause is jobstore's own, not Flink's: {snippet(json.dumps(done), 600)}")
    status, answer = b.flink_status(rid)
    if status == 200:
        theirs = (json.loads(answer).get("operation") or {}).get("failure-cause")
        expect(theirs == fc, f"jobstore's failure-cause differs from Flink's for trigger {rid}: "
                             f"jobstore {snippet(json.dumps(fc), 300)} / Flink {snippet(answer, 300)}")
        log(f"{rid}: failure-cause equal to Flink's ({fc.get('class')})")
        return f"failure-cause {fc.get('class')} equal to Flink's"
    if status == 404:
        log(f"{rid}: Flink no longer has the trigger; failure-cause not compared")
        return "Flink no longer has the trigger; failure-cause not compared"
    raise Fail(f"Flink GET /jobs/{b.job}/savepoints/{rid}: HTTP {status} {snippet(answer)}")


def chk_listing(b):
    """The management listing shows every operation of the job with its kind, COMPLETED and the
    stored outcome (and nothing else for that job)."""
    url = f"{b.url}/v1/clusters/default/savepoint-operations?job-id={b.job}"
    status, answer = http("GET", url)
    expect(status == 200, f"GET /v1/clusters/default/savepoint-operations?job-id={b.job}: HTTP {status} {snippet(answer)}")
    try:
        got = {op.get("request-id"): op for op in json.loads(answer)["savepoint-operations"]}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise Fail(f"listing unreadable: {snippet(answer)}") from None
    problems = []
    for rid, (kind, outcome, done) in b.ops.items():
        op = got.pop(rid, None)
        if op is None:
            problems.append(f"{rid} missing from the listing")
            continue
        wrong = {k: op.get(k) for k, v in (("kind", kind), ("status", "COMPLETED"), ("cluster-id", "default"),
                                           ("job-id", b.job)) if op.get(k) != v}
        if wrong:
            problems.append(f"{rid} (expected {kind} COMPLETED) has {wrong}")
            continue
        if done is None:
            problems.append(f"{rid} never completed through the status route")
            continue
        stored = done["operation"]
        if outcome == "location":
            if op.get("location") != stored.get("location") or op.get("failure-cause") is not None:
                problems.append(f"{rid}: location {op.get('location')!r}, status route says {stored.get('location')!r}")
        elif op.get("failure-cause") != stored.get("failure-cause") or op.get("location") is not None:
            problems.append(f"{rid}: failure-cause differs from the status route's")
        if not op.get("completed-at"):
            problems.append(f"{rid}: no completed-at")
    problems += [f"unexpected operation {rid} in the listing" for rid in got]
    if not b.ops:
        problems.append("no operations recorded for this job")
    expect(not problems, "; ".join(problems))
    log(f"listing: {len(b.ops)} operations of job {b.job} COMPLETED with their kinds")
    return f"{len(b.ops)} operations COMPLETED with their kinds"


def chk_restart(b):
    """jobstore restart (SIGTERM, start again on the same database): the operations still read."""
    rc = b.jobstore.stop()
    rc_note = "" if rc == 0 else f"jobstore exited with status {rc} after SIGTERM (expected 0)"
    try:
        b.jobstore.start()
    except Fail as e:
        raise Fail(f"jobstore did not start again on the same database ({e})" + (f"; {rc_note}" if rc_note else "")) from None
    detail = b.same_answers()
    expect(not rc_note, rc_note)
    return detail + ", exit status 0 after SIGTERM"


def chk_flink_forgot(b):
    """After the JobManager restart Flink answers 404 for every trigger; jobstore still COMPLETED."""
    for rid in b.ops:
        status, answer = b.flink_status(rid)
        expect(status == 404, f"Flink still answers HTTP {status} for {rid} after the JobManager restart: {snippet(answer, 200)}")
    return b.same_answers()


# --- the steps -------------------------------------------------------------------------------------

BACKENDS = ["postgres", "sqlite"]
backends = pytest.mark.parametrize("backend", BACKENDS)


@pytest.mark.required
def test_flink_cluster_starts(ctx, s):
    """The probe job built, a Flink cluster of one JobManager and one TaskManager."""
    s.cluster, s.sp_dir, detail = ctx.session_cluster()
    return detail


@pytest.mark.required
def test_no_default_savepoint_dir(s):
    """This suite needs Flink without a default savepoint directory."""
    expect(not re.search(r"savepoint-dir|state\.savepoints\.dir", s.cluster.config_text()),
           "execution.checkpointing.savepoint-dir is configured")


@pytest.mark.required
def test_one_unbounded_job_per_backend_submitted(ctx, s):
    """20 records/s, snapshotState sleeps 1 s; a jobstore (not started yet) per backend."""
    jobs = [s.cluster.submit(0, 20, f"jobstore-sp-{label}", 1000) for label in BACKENDS]
    db = ctx.postgres.create_database("jobstore_flink")
    urls = [db.url(), f"sqlite://{ctx.path('jobstore.db')}"]
    s.backends = {label: Backend(ctx, label, url, job, s.cluster.rest, s.sp_dir)
                  for label, url, job in zip(BACKENDS, urls, jobs)}
    return " ".join(jobs)


@backends
@pytest.mark.required
def test_jobstore_serve_starts(s, backend):
    b = s.backends[backend]
    log(f"=== {backend}: jobstore on {re.sub(r'//[^@/]*@', '//***@', b.jobstore.database_url)}, Flink job {b.job}")
    return b.jobstore.start()


@backends
@pytest.mark.required
def test_flink_job_running(s, backend):
    b = s.backends[backend]
    s.cluster.wait_job(b.job, "RUNNING", 120)
    return f"job {b.job}"


@backends
def test_savepoint_through_jobstore(s, backend):
    """savepoint {} through jobstore: IN_PROGRESS then COMPLETED, location from --savepoint-dir
    with _metadata on disk, Flink knows the request-id."""
    return chk_savepoint(s.backends[backend], {}, None)


@backends
def test_savepoint_with_trigger_id(s, backend):
    """savepoint {"triggerId"} through jobstore: request-id = triggerId, IN_PROGRESS then
    COMPLETED, _metadata on disk, Flink knows the triggerId."""
    trig = random_hex(16)
    return chk_savepoint(s.backends[backend], {"triggerId": trig}, trig)


@backends
def test_stop_with_savepoint(s, backend):
    """stop-with-savepoint {"drain": false} through jobstore: COMPLETED with a location on disk,
    Flink job FINISHED."""
    return chk_stop(s.backends[backend], s.cluster)


@backends
def test_savepoint_of_finished_job_has_flinks_failure_cause(s, backend):
    """savepoint of the FINISHED job: COMPLETED with Flink's FlinkJobNotFoundException
    failure-cause, equal to Flink's JSON."""
    return chk_finished_job(s.backends[backend])


@backends
def test_listing_shows_operations(s, backend):
    """GET /v1/clusters/default/savepoint-operations lists them: SAVEPOINT / STOP_WITH_SAVEPOINT,
    COMPLETED."""
    return chk_listing(s.backends[backend])


@backends
def test_same_answers_after_jobstore_restart(s, backend):
    """After a jobstore restart (SIGTERM, same database) every operation answers the same."""
    return chk_restart(s.backends[backend])


@pytest.mark.required
def test_jobmanager_restarted(s):
    """Flink forgets every operation (its JobManager keeps them in memory only): SIGTERM, start
    on the same ports, the TaskManager registered again. PostgreSQL's jobstore is stopped
    meanwhile, SQLite's keeps running."""
    s.backends["postgres"].jobstore.stop()
    t0 = time.time()
    s.cluster.restart_jobmanager(s.cluster.jms[0])
    return f"in {time.time() - t0:.0f} s"


@backends
@pytest.mark.required
def test_operations_created_before_jobmanager_restart(s, backend):
    b = s.backends[backend]
    expect(b.ops, "no operations were created in this backend's phase")
    return f"{len(b.ops)} operations"


@backends
@pytest.mark.required
def test_jobstore_serves_after_jobmanager_restart(s, backend):
    """PostgreSQL's jobstore starts again, SQLite's ran through the restart."""
    b = s.backends[backend]
    if b.jobstore.alive():
        return f"running since before the restart (pid {b.jobstore.proc.pid})"
    return b.jobstore.start()


@backends
def test_still_completed_after_flink_forgot(s, backend):
    """After Flink forgot the operations (JobManager restart: Flink 404): jobstore still
    COMPLETED, same location / failure-cause."""
    return chk_flink_forgot(s.backends[backend])


@backends
def test_listing_still_shows_every_operation(s, backend):
    return chk_listing(s.backends[backend])
