"""Savepoint operations through jobstore on a real Flink 2.3.0 session cluster.

jobstore (`serve --flink-rest-url ... --savepoint-dir ...`) drives savepoints and
stop-with-savepoint on Flink with its own request-id as Flink's triggerId, stores Flink's location
or failure-cause verbatim, and keeps answering after a jobstore restart and after Flink forgot the
operation (JobManager restart). Every check runs on PostgreSQL and on SQLite, against one Flink
cluster (one JobManager, one TaskManager, no default savepoint directory) and one unbounded job
per backend (20 records/s, snapshotState sleeps 1 s so that an operation is IN_PROGRESS long
enough to be seen).
"""
import json
import os
import re
import time

from harness import Abort, Fail, expect, http, log, random_hex, snippet

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


# --- phases --------------------------------------------------------------------------------------

def phase(ctx, b, cluster):
    """The checks of one backend, up to the jobstore restart; leaves jobstore running. A failed
    start stops this backend's phase only."""
    try:
        phase_checks(ctx, b, cluster)
    except Abort as e:
        log(f"{b.label}: stopped after a failed step: {e}")


def phase_checks(ctx, b, cluster):
    t0 = time.time()
    log(f"=== {b.label}: jobstore on {re.sub(r'//[^@/]*@', '//***@', b.jobstore.database_url)}, Flink job {b.job}")
    L = f"[{b.label}]"
    ctx.require(f"{L} jobstore serve starts", b.jobstore.start)
    ctx.require(f"{L} Flink job RUNNING", lambda: cluster.wait_job(b.job, "RUNNING", 120) and f"job {b.job}")
    ctx.check(f"{L} savepoint {{}} through jobstore: IN_PROGRESS then COMPLETED, location from --savepoint-dir with "
              "_metadata on disk, Flink knows the request-id", chk_savepoint, b, {}, None)
    trig = random_hex(16)
    ctx.check(f'{L} savepoint {{"triggerId"}} through jobstore: request-id = triggerId, IN_PROGRESS then COMPLETED, '
              "_metadata on disk, Flink knows the triggerId", chk_savepoint, b, {"triggerId": trig}, trig)
    ctx.check(f'{L} stop-with-savepoint {{"drain": false}} through jobstore: COMPLETED with a location on disk, '
              "Flink job FINISHED", chk_stop, b, cluster)
    ctx.check(f"{L} savepoint of the FINISHED job: COMPLETED with Flink's FlinkJobNotFoundException failure-cause, "
              "equal to Flink's JSON", chk_finished_job, b)
    ctx.check(f"{L} GET /v1/clusters/default/savepoint-operations lists them: SAVEPOINT / STOP_WITH_SAVEPOINT, COMPLETED",
              chk_listing, b)
    ctx.check(f"{L} after a jobstore restart (SIGTERM, same database) every operation answers the same", chk_restart, b)
    log(f"=== {b.label}: {time.time() - t0:.0f}s")


def after_flink_forgot(ctx, b):
    """jobstore (started if needed) after the JobManager restart."""
    try:
        forgot_checks(ctx, b)
    except Abort as e:
        log(f"{b.label}: stopped after a failed step: {e}")


def forgot_checks(ctx, b):
    L = f"[{b.label}]"
    ctx.require(f"{L} operations were created before the JobManager restart",
                lambda: expect(b.ops, "no operations were created in this backend's phase") and f"{len(b.ops)} operations")
    if not b.jobstore.alive():
        ctx.require(f"{L} jobstore serve starts (after the JobManager restart)", b.jobstore.start)
    ctx.check(f"{L} after Flink forgot the operations (JobManager restart: Flink 404): jobstore still COMPLETED, "
              "same location / failure-cause", chk_flink_forgot, b)
    ctx.check(f"{L} listing still shows every operation COMPLETED after Flink forgot them", chk_listing, b)


def run(ctx):
    db = ctx.postgres.create_database("jobstore_flink")
    cluster, sp_dir = ctx.session_cluster()
    ctx.require("the Flink cluster has no default savepoint directory (this suite needs it unset)",
                lambda: expect(not re.search(r"savepoint-dir|state\.savepoints\.dir", cluster.config_text()),
                               "execution.checkpointing.savepoint-dir is configured"))
    # one unbounded job per backend (20 records/s, snapshotState sleeps 1 s), submitted up front
    jobs = ctx.require("one unbounded job per backend submitted", lambda: [
        cluster.submit(0, 20, f"jobstore-sp-{label}", 1000) for label in ("postgres", "sqlite")])
    pg = Backend(ctx, "postgres", db.url(), jobs[0], cluster.rest, sp_dir)
    sqlite = Backend(ctx, "sqlite", f"sqlite://{ctx.path('jobstore.db')}", jobs[1], cluster.rest, sp_dir)

    phase(ctx, pg, cluster)
    pg.jobstore.stop()
    phase(ctx, sqlite, cluster)  # its jobstore keeps running through the JobManager restart

    # Flink forgets every operation: its JobManager keeps them in memory only.
    t0 = time.time()
    ctx.require("Flink's JobManager restarted (SIGTERM, same ports), the TaskManager registered again",
                lambda: cluster.restart_jobmanager(cluster.jms[0]) or f"in {time.time() - t0:.0f}s")
    after_flink_forgot(ctx, sqlite)
    sqlite.jobstore.stop()
    after_flink_forgot(ctx, pg)
    pg.jobstore.stop()
