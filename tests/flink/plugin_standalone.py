"""The jobstore HA plugin on a real Flink 2.3.0 and a real jobstore on PostgreSQL.

  0. the plugin's self-tests (every *SelfTest class with a main under
     flink-ha-plugin/src/test/java, each of its cases one check): with `--fake RESOURCES_DIR`
     (Flink's JobResultStore contract cases against a fake with fault injection: retries, 409/404
     mapping, lost answers, paging, auth; the HA modes), then with
     `--url URL --token WRITE --read-token READ` against the real jobstore. jobstore runs with
     bearer tokens: Flink cluster A gets its write token (limited to A's cluster id) from
     jobstore.token, cluster B its own from jobstore.token-file; A's token is refused on B's
     entries (403).
  1. a bounded job: its job entry and its application entry are dirty (observed while the proxy
     holds Flink's mark-clean), then clean; the stored result equals Flink's
     /jobs/<id>/execution-result, the application entry matches /applications/<id>.
  2. a failing job: the entry carries FAILED and Flink's failure-cause.
  3. recovery: jobstore is stopped while Flink's mark-clean of a finished job is in flight, so the
     entries stay dirty; jobstore comes back, the JobManager is restarted: it starts without a
     fatal error, finds the dirty entries through getDirtyResults and cleans them.
  4. two Flink clusters with different cluster ids on one jobstore: neither sees the other's
     entries (B starts while A has dirty entries and finds none; B runs a job with A's job id).

Flink A talks to jobstore through FaultProxy, which forwards everything and can hold mark-clean
requests: that is how the dirty state is observed and how jobstore is stopped exactly between
Flink's create and its mark-clean.
"""
import json
import os
import time

import flink as flinklib
from harness import Fail, dig, expect, get_json, http, random_hex, snippet, status_of, wait_for

RESOURCES = os.path.join(flinklib.PLUGIN_DIR, "src", "test", "resources", "flink-2.3-files")


class Reader:
    """Reads jobstore with the read token."""

    def __init__(self, token):
        self.token = token

    def get(self, url):
        return get_json(url, token=self.token)

    def wait_state(self, url, state, timeout):
        """Polls an entry until its "state" is state (jobstore may be restarting meanwhile)."""
        last = []

        def reached():
            status, body = http("GET", url, timeout=5, token=self.token)
            last[:] = [json.loads(body).get("state") if status == 200 else f"HTTP {status}"]
            return last[0] == state
        try:
            wait_for(url, reached, timeout, 0.2)
        except Fail:
            raise Fail(f"{url}: state {last[0] if last else None!r}, wanted {state!r} within {timeout}s") from None
        return f"state {state}"

    def field(self, url, path, want):
        v = dig(self.get(url), path)
        expect(v == want, f"{path} is {v!r}, expected {want!r}")
        return f"{path}={v}"

    def ids(self, url, key, id_field):
        """The sorted ids of a listing, read in pages of 2."""
        ids, after = [], None
        while True:
            page = self.get(url + ("&" if "?" in url else "?") + "limit=2" + (f"&after={after}" if after else ""))
            ids += [e[id_field] for e in page[key]]
            after = page.get("next")
            if not after:
                return sorted(ids)


def flink_result(flink_url, job):
    r = get_json(f"{flink_url}/jobs/{job}/execution-result")
    expect(dig(r, "status.id") == "COMPLETED", f"execution-result of {job} not COMPLETED: {snippet(json.dumps(r))}")
    return r["job-execution-result"]


def compare_job(reader, entry_url, flink_url, job):
    """The stored result is Flink's /jobs/<id>/execution-result, field for field."""
    entry = reader.get(entry_url)
    stored, reported = entry["result"], flink_result(flink_url, job)
    problems = [f"{k}: stored {stored.get(k)!r}, Flink {reported.get(k)!r}"
                for k in ("id", "name", "application-status", "net-runtime") if stored.get(k) != reported.get(k)]
    if entry.get("job-id") != job:
        problems.append(f"job-id {entry.get('job-id')!r}")
    if stored != reported:
        problems.append(f"whole result differs in {sorted(k for k in set(stored) | set(reported) if stored.get(k) != reported.get(k))}")
    expect(not problems, "; ".join(problems))
    return (f"id={stored['id']} name={stored['name']} status={stored['application-status']} "
            f"net-runtime={stored['net-runtime']} (all {len(stored)} fields equal)")


def compare_app(reader, entry_url, flink_url, app):
    """The stored application result matches Flink's /applications/<id>."""
    entry = reader.get(entry_url)
    stored, reported = entry["result"], get_json(f"{flink_url}/applications/{app}")
    problems = [f"{mine}: stored {stored.get(mine)!r}, Flink {reported.get(theirs)!r}"
                for mine, theirs in (("application-id", "id"), ("application-name", "name"),
                                     ("application-state", "status"), ("end-time", "end-time"))
                if stored.get(mine) != reported.get(theirs)]
    if entry.get("application-id") != app:
        problems.append(f"application-id {entry.get('application-id')!r}")
    expect(not problems, "; ".join(problems))
    return f"application-id={stored['application-id']} state={stored['application-state']} name={stored['application-name']}"


def compare_failure(reader, entry_url, flink_url, job, text):
    """A FAILED result whose failure-cause is Flink's and names the probe's failure."""
    stored, reported = reader.get(entry_url)["result"], flink_result(flink_url, job)
    problems = []
    if stored.get("application-status") != "FAILED":
        problems.append(f"application-status {stored.get('application-status')!r}")
    cause, flink_cause = stored.get("failure-cause"), reported.get("failure-cause") or {}
    if not isinstance(cause, dict):
        problems.append("no failure-cause stored")
    else:
        if cause != flink_cause:
            problems.append(f"failure-cause differs from Flink's in {sorted(k for k in set(cause) | set(flink_cause) if cause.get(k) != flink_cause.get(k))}")
        if text not in cause.get("stack-trace", ""):
            problems.append(f"stack-trace lacks {text!r}")
    expect(not problems, "; ".join(problems))
    return (f"status=FAILED class={cause['class']} stack-trace={len(cause['stack-trace'])} chars "
            "(failure-cause equals Flink's)")


def run_with_id(cluster, job_id, *args):
    """Submits the probe job with a fixed job id: (job id, None) or (None, Flink's last cause)."""
    status, resp = cluster.run_jar(*args, job_id=job_id)
    if status == 200:
        return json.loads(resp)["jobid"], None
    text = "\n".join(json.loads(resp).get("errors") or [""])
    causes = [line.strip() for line in text.split("\n") if line.startswith("Caused by:")]
    return None, (causes[-1] if causes else text.split("\n")[0])


def run(ctx):
    flink = ctx.flink()
    checks = ctx.checks
    ctx.require("build.sh built the plugin", lambda: f"{os.path.basename(flink.plugin_jar())} with javac against {flink.dist_jar}")
    ctx.require("the plugin's test classes and the probe job compiled", lambda: flink.test_classpath() and flink.probe_jar() and True)
    self_tests = flinklib.self_test_classes()
    ctx.require("self-test classes found under flink-ha-plugin/src/test/java",
                lambda: expect(self_tests, "no *SelfTest class with a main method") and ", ".join(self_tests))

    for cls in self_tests:
        flinklib.run_self_test(checks, flink, cls, "self-test, fake jobstore", ["--fake", RESOURCES], ctx.scratch)

    # jobstore with bearer tokens on a fresh PostgreSQL database. Each Flink cluster gets a write
    # token limited to its cluster id (A's in jobstore.token, B's in jobstore.token-file); the
    # self-tests write with a write token for every cluster; the checks below read with a read
    # token.
    db = ctx.postgres.create_database("jobstore_plugin")
    run_id = random_hex(3)
    cluster_a, cluster_b = f"plugin-a-{run_id}", f"plugin-b-{run_id}"
    write_token, read_token = "w" + random_hex(16), "r" + random_hex(16)
    token_a, token_b = "a" + random_hex(16), "b" + random_hex(16)
    tokens, token_file = ctx.path("tokens"), ctx.path("flink-token")
    for path, text in ((tokens, f"write {write_token}\nread {read_token}\nwrite {cluster_a} {token_a}\n"
                                f"write {cluster_b} {token_b}\n"), (token_file, token_b + "\n")):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(text)
    js = ctx.jobstore("jobstore", db.url(), ["--tokens-file", tokens])
    ctx.require(f"jobstore serving on PostgreSQL database {db.name}, bearer tokens on", js.start)
    ctx.check("jobstore refuses a request without a token", lambda: expect(
        status_of(f"{js.url}/v1/clusters/x/job-results") == 401, "not 401") and "401")

    for cls in self_tests:
        flinklib.run_self_test(checks, flink, cls, "self-test, jobstore on PostgreSQL",
                               ["--url", js.url, "--token", write_token, "--read-token", read_token], ctx.scratch)

    reader = Reader(read_token)
    proxy = ctx.require("FaultProxy in front of jobstore", lambda: flinklib.FaultProxy(flink, "proxy", js.url, ctx.scratch))

    def plugin_conf(cluster_id, url, token_line):
        return {"high-availability.type": flinklib.PLUGIN_FACTORY, "high-availability.cluster-id": cluster_id, "jobstore.url": url,
                **token_line, "jobstore.timeout": "5s", "jobstore.retries": "2", "jobstore.retry-backoff": "200ms"}

    # Flink cluster A ------------------------------------------------------------------------------
    a = ctx.cluster("flink-A", plugin_conf(cluster_a, proxy.url, {"jobstore.token": token_a}),
                    extra_jars=[flink.plugin_jar()])
    ctx.require(f"Flink 2.3.0 cluster A started with high-availability.type {flinklib.PLUGIN_FACTORY}, token in jobstore.token",
                lambda: f"at {a.start().rest}")
    jm_a = a.jms[0]
    using = f"Using jobstore at {proxy.url} for job and application results of cluster '{cluster_a}'"
    ctx.check("factory instantiated in the JobManager", flinklib.log_line, jm_a, using)
    ctx.check("factory instantiated in the TaskManager", flinklib.log_line, a.tm, using)
    ctx.check("JobManager start called getDirtyResults (job results)", flinklib.log_line, jm_a,
              f"Found 0 dirty job result(s) in jobstore (cluster {cluster_a})")
    ctx.check("JobManager start called getDirtyResults (application results)", flinklib.log_line, jm_a,
              f"Found 0 dirty application result(s) in jobstore (cluster {cluster_a})")

    jr_a = f"{js.url}/v1/clusters/{cluster_a}/job-results"
    ar_a = f"{js.url}/v1/clusters/{cluster_a}/application-results"
    jr_b = f"{js.url}/v1/clusters/{cluster_b}/job-results"
    ar_b = f"{js.url}/v1/clusters/{cluster_b}/application-results"

    # (1) a bounded job ----------------------------------------------------------------------------
    proxy.hold()
    j1 = ctx.require("(1) the bounded job is submitted", lambda: a.submit(200, 100, "probe-bounded"))
    ctx.check(f"(1) Flink tried to mark job {j1} clean (request held by the proxy)", proxy.wait_held)
    ctx.check("(1) job entry is dirty while Flink's mark-clean is held", reader.wait_state, f"{jr_a}/{j1}", "dirty", 10)
    ctx.check("(1) application entry is dirty while Flink's mark-clean is held", reader.wait_state, f"{ar_a}/{j1}", "dirty", 10)
    proxy.release()
    ctx.check("(1) Flink reports the job FINISHED", a.wait_job, j1, "FINISHED", 60)
    ctx.check("(1) job entry is then clean", reader.wait_state, f"{jr_a}/{j1}", "clean", 30)
    ctx.check("(1) application entry is then clean", reader.wait_state, f"{ar_a}/{j1}", "clean", 30)
    ctx.check(f"(1) stored job result equals Flink's /jobs/{j1}/execution-result", compare_job, reader, f"{jr_a}/{j1}", a.rest, j1)
    ctx.check(f"(1) stored application result matches Flink's /applications/{j1}", compare_app, reader, f"{ar_a}/{j1}", a.rest, j1)
    ctx.check("(1) application entry is FINISHED", reader.field, f"{ar_a}/{j1}", "result.application-state", "FINISHED")

    # (2) a failing job ----------------------------------------------------------------------------
    j2 = ctx.require("(2) the failing job is submitted", lambda: a.submit(100000, 100, "probe-failing", 0, 50))
    ctx.check("(2) Flink reports the job FAILED", a.wait_job, j2, "FAILED", 60)
    ctx.check("(2) job entry ends clean", reader.wait_state, f"{jr_a}/{j2}", "clean", 30)
    ctx.check("(2) stored entry carries FAILED and Flink's failure-cause", compare_failure, reader, f"{jr_a}/{j2}", a.rest, j2,
              "intentional failure after 50 records")
    ctx.check(f"(2) stored job result equals Flink's /jobs/{j2}/execution-result", compare_job, reader, f"{jr_a}/{j2}", a.rest, j2)
    ctx.check("(2) application entry ends clean with state FAILED", lambda: reader.wait_state(f"{ar_a}/{j2}", "clean", 30)
              and reader.field(f"{ar_a}/{j2}", "result.application-state", "FAILED"))

    # (3) recovery ---------------------------------------------------------------------------------
    proxy.hold()
    j3 = ctx.require("(3) the job is submitted", lambda: a.submit(200, 100, "probe-recovered"))
    ctx.check(f"(3) Flink tried to mark job {j3} clean (request held)", proxy.wait_held)
    ctx.check("(3) job entry is dirty", reader.wait_state, f"{jr_a}/{j3}", "dirty", 10)
    ctx.check("(3) application entry is dirty", reader.wait_state, f"{ar_a}/{j3}", "dirty", 10)
    js.stop()  # then Flink's mark-clean goes through, to a stopped jobstore
    proxy.release()
    ctx.check("(3) Flink could not mark the result clean (jobstore stopped) and logged it",
              flinklib.wait_log, jm_a, f"Could not properly mark job {j3} result as clean", 60)
    ctx.check("(3) the JobManager survived the failed mark-clean",
              lambda: expect(status_of(a.rest + "/overview") == 200, "no answer from /overview") and "REST answers")
    ctx.require("(3) jobstore back on the same database", js.start)
    ctx.check("(3) job entry is still dirty in jobstore", reader.field, f"{jr_a}/{j3}", "state", "dirty")
    ctx.check("(3) application entry is still dirty in jobstore", reader.field, f"{ar_a}/{j3}", "state", "dirty")

    # (4, first half) cluster B starts while A has dirty entries -------------------------------------
    b = ctx.cluster("flink-B", plugin_conf(cluster_b, js.url, {"jobstore.token-file": token_file}),
                    extra_jars=[flink.plugin_jar()])
    ctx.require("(4) Flink cluster B started, talking to jobstore directly, token from jobstore.token-file",
                lambda: f"at {b.start().rest}")
    ctx.check("(4) B's JobManager finds none of A's dirty job results", flinklib.log_line, b.jms[0],
              f"Found 0 dirty job result(s) in jobstore (cluster {cluster_b})")
    ctx.check("(4) B's JobManager finds none of A's dirty application results", flinklib.log_line, b.jms[0],
              f"Found 0 dirty application result(s) in jobstore (cluster {cluster_b})")

    t0 = time.time()
    ctx.require("(3) A's JobManager restarted and the TaskManager re-registered",
                lambda: a.restart_jobmanager(jm_a) or f"in {time.time() - t0:.0f} s")
    ctx.check("(3) the new JobManager found the dirty job result through getDirtyResults",
              flinklib.wait_log, jm_a, f"Found 1 dirty job result(s) in jobstore (cluster {cluster_a})", 30)
    ctx.check("(3) ... and the dirty application result",
              flinklib.wait_log, jm_a, f"Found 1 dirty application result(s) in jobstore (cluster {cluster_a})", 30)
    ctx.check("(3) job entry ends clean", reader.wait_state, f"{jr_a}/{j3}", "clean", 60)
    ctx.check("(3) application entry ends clean", reader.wait_state, f"{ar_a}/{j3}", "clean", 60)
    ctx.check("(3) the recovered entry kept Flink's result", reader.field, f"{jr_a}/{j3}", "result.name", "probe-recovered")
    ctx.check("(3) no fatal error in the new JobManager", lambda: expect(not jm_a.fatal_lines(), snippet(
        "; ".join(jm_a.fatal_lines()), 300)) and f"no fatal error in {os.path.basename(jm_a.log_file())}")
    ctx.check("(3) the JobManager is up after the recovery", lambda: expect(
        get_json(a.rest + "/overview").get("taskmanagers") == 1, "not 1 TaskManager") and "REST /overview: 1 TaskManager")

    # (4, second half) B runs a job with A's job id ---------------------------------------------------
    def b_accepts():
        job, cause = run_with_id(b, j1, 100, 100, "probe-b-same-id")
        expect(job == j1, f"REJECTED: {cause}")
        return job
    ctx.check(f"(4) B does not see A's entries: B accepts a job with A's job id {j1}", b_accepts)
    ctx.check("(4) B's job with A's job id finishes", b.wait_job, j1, "FINISHED", 60)
    ctx.check(f"(4) B's entry for {j1} ends clean under cluster {cluster_b}", reader.wait_state, f"{jr_b}/{j1}", "clean", 30)
    ctx.check("(4) B's entry is B's job", reader.field, f"{jr_b}/{j1}", "result.name", "probe-b-same-id")
    ctx.check(f"(4) A's entry for {j1} is still A's job", reader.field, f"{jr_a}/{j1}", "result.name", "probe-bounded")

    def exactly(url, key, id_field, want, what):
        got = reader.ids(url, key, id_field)
        expect(got == sorted(want), f"{got}, expected {sorted(want)}")
        return f"{len(got)} {what}"
    ctx.check("(4) A's job results are exactly A's three jobs", exactly, f"{jr_a}?state=all", "job-results", "job-id",
              [j1, j2, j3], "entries")
    ctx.check("(4) B's job results are exactly B's one job", exactly, f"{jr_b}?state=all", "job-results", "job-id", [j1], "entry")
    ctx.check("(4) B's application results are exactly B's one application", exactly, f"{ar_b}?state=all",
              "application-results", "application-id", [j1], "entry")

    def a_refuses():
        job, cause = run_with_id(a, j1, 100, 100, "probe-a-again")
        expect(job is None, f"A accepted it as job {job}")
        expect("DuplicateApplicationSubmissionException" in cause, f"refused for another reason: {cause}")
        return f"REJECTED: {cause}"
    ctx.check(f"(4) control: A (restarted, so only jobstore remembers {j1}) refuses a job with that id", a_refuses)
    ctx.check(f"(4) A's token (write {cluster_a}) is refused on B's entries: 403",
              lambda: expect(status_of(f"{jr_b}?state=all", token=token_a) == 403, "not 403") and "403")
