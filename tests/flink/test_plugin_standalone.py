"""The jobstore HA plugin on a real Flink 2.3.0 and a real jobstore on PostgreSQL.

  0. the plugin's self-tests (every *SelfTest class with a main under
     flink-ha-plugin/src/test/java: one test per class and mode, the classes of a mode side by
     side, each of a class's cases a subtest): with `--fake RESOURCES_DIR`
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

import pytest

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


# --- the steps -------------------------------------------------------------------------------------

SELF_TESTS = flinklib.self_test_classes()


def short(cls):
    return cls.rsplit(".", 1)[-1]


@pytest.mark.required
def test_plugin_test_classes_and_probe_job_built(ctx):
    return ctx.plugin_built()


@pytest.mark.required
def test_self_test_classes_found():
    """Under flink-ha-plugin/src/test/java."""
    expect(SELF_TESTS, "no *SelfTest class with a main method")
    return ", ".join(SELF_TESTS)


def start_self_tests(request, ctx, label, args):
    """The self-tests of the requesting class that this run chose, started side by side."""
    chosen = {item.callspec.params["cls"] for item in request.session.items if item.cls is request.cls}
    return {cls: flinklib.SelfTest(ctx.flink(), cls, label, args, ctx.scratch) for cls in SELF_TESTS if cls in chosen}


def self_test_cases(run, subtests):
    """Each case of a self-test's run is a subtest; the run must complete."""
    cases, problem = run.result()
    for ok, case in cases:
        with subtests.test(msg=case):
            if not ok:
                pytest.fail(case, pytrace=False)
    if problem:
        pytest.fail(problem, pytrace=False)
    return f"{len(cases)} cases passed"


@pytest.fixture(scope="class")
def fake_runs(request, ctx):
    return start_self_tests(request, ctx, "self-test, fake jobstore", ["--fake", RESOURCES])


@pytest.mark.independent
@pytest.mark.parametrize("cls", SELF_TESTS, ids=short)
class TestSelfTestsOnFakeJobstore:
    """Flink's JobResultStore contract cases against a fake with fault injection (retries, 409/404
    mapping, lost answers, paging, auth; the HA modes)."""

    def test_self_test(self, fake_runs, cls, subtests):
        return self_test_cases(fake_runs[cls], subtests)


@pytest.mark.required
def test_jobstore_serving_with_bearer_tokens(ctx, s):
    """jobstore with bearer tokens on a fresh PostgreSQL database. Each Flink cluster gets a write
    token limited to its cluster id (A's in jobstore.token, B's in jobstore.token-file); the
    self-tests write with a write token for every cluster; the steps below read with a read
    token."""
    db = ctx.postgres.create_database("jobstore_plugin")
    run_id = random_hex(3)
    s.cluster_a, s.cluster_b = f"plugin-a-{run_id}", f"plugin-b-{run_id}"
    s.write_token, read_token = "w" + random_hex(16), "r" + random_hex(16)
    s.token_a, token_b = "a" + random_hex(16), "b" + random_hex(16)
    tokens, s.token_file = ctx.path("tokens"), ctx.path("flink-token")
    for path, text in ((tokens, f"write {s.write_token}\nread {read_token}\nwrite {s.cluster_a} {s.token_a}\n"
                                f"write {s.cluster_b} {token_b}\n"), (s.token_file, token_b + "\n")):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(text)
    s.reader = Reader(read_token)
    s.js = ctx.jobstore("jobstore", db.url(), ["--tokens-file", tokens])
    s.jr_a, s.ar_a, s.jr_b, s.ar_b = (f"{s.js.url}/v1/clusters/{c}/{kind}" for c in (s.cluster_a, s.cluster_b)
                                      for kind in ("job-results", "application-results"))
    return f"database {db.name}, {s.js.start()}"


def test_jobstore_refuses_request_without_token(s):
    expect(status_of(f"{s.js.url}/v1/clusters/x/job-results") == 401, "not 401")
    return "401"


@pytest.fixture(scope="class")
def jobstore_runs(request, ctx, s):
    return start_self_tests(request, ctx, "self-test, jobstore on PostgreSQL",
                            ["--url", s.js.url, "--token", s.write_token, "--read-token", s.reader.token])


@pytest.mark.independent
@pytest.mark.parametrize("cls", SELF_TESTS, ids=short)
class TestSelfTestsOnJobstore:
    """Flink's contract cases, paging, cluster isolation and the answer to a read-only token,
    against the real jobstore (fresh random cluster ids)."""

    def test_self_test(self, jobstore_runs, cls, subtests):
        return self_test_cases(jobstore_runs[cls], subtests)


@pytest.mark.required
def test_fault_proxy_in_front_of_jobstore(ctx, s):
    s.proxy = flinklib.FaultProxy(ctx.flink(), "proxy", s.js.url, ctx.scratch)
    return str(s.proxy)


def plugin_conf(cluster_id, url, token_line):
    return {"high-availability.type": flinklib.PLUGIN_FACTORY, "high-availability.cluster-id": cluster_id,
            "jobstore.url": url, **token_line, "jobstore.timeout": "5s", "jobstore.retries": "2",
            "jobstore.retry-backoff": "200ms"}


# Flink cluster A ----------------------------------------------------------------------------------

@pytest.mark.required
def test_cluster_a_started_with_the_plugin(ctx, s):
    """Flink 2.3.0 cluster A with high-availability.type JobstoreHaServicesFactory, its token in
    jobstore.token, talking to jobstore through the FaultProxy."""
    flink = ctx.flink()
    s.a = ctx.cluster("flink-A", plugin_conf(s.cluster_a, s.proxy.url, {"jobstore.token": s.token_a}),
                      extra_jars=[flink.plugin_jar()])
    s.jm_a = s.a.jms[0]
    return f"at {s.a.start().rest}"


def using(s):
    return f"Using jobstore at {s.proxy.url} for job and application results of cluster '{s.cluster_a}'"


def test_factory_instantiated_in_jobmanager(s):
    return flinklib.log_line(s.jm_a, using(s))


def test_factory_instantiated_in_taskmanager(s):
    return flinklib.log_line(s.a.tm, using(s))


def test_jobmanager_start_called_get_dirty_results_job_results(s):
    return flinklib.log_line(s.jm_a, f"Found 0 dirty job result(s) in jobstore (cluster {s.cluster_a})")


def test_jobmanager_start_called_get_dirty_results_application_results(s):
    return flinklib.log_line(s.jm_a, f"Found 0 dirty application result(s) in jobstore (cluster {s.cluster_a})")


# (1) a bounded job --------------------------------------------------------------------------------

ENTRIES = pytest.mark.parametrize("entry", ["job", "application"])


def submitted_held(s, *args):
    """The probe job submitted with Flink's mark-clean held at the proxy, until Flink tries to
    mark its result clean: the job id."""
    s.proxy.hold()
    job = s.a.submit(*args)
    s.proxy.wait_held()
    return job


def entry_url(s, entry, job):
    return f"{s.jr_a if entry == 'job' else s.ar_a}/{job}"


@pytest.mark.required
def test_1_bounded_job_submitted_flink_tries_to_mark_it_clean(s):
    """With Flink's mark-clean held at the proxy."""
    s.j1 = submitted_held(s, 200, 100, "probe-bounded")
    return f"{s.j1}: mark-clean held"


@ENTRIES
def test_1_entry_dirty_while_mark_clean_held(s, entry):
    """The job entry, then the application entry; Flink's mark-clean released after."""
    try:
        return s.reader.wait_state(entry_url(s, entry, s.j1), "dirty", 10)
    finally:
        if entry == "application":
            s.proxy.release()


def test_1_flink_reports_job_finished(s):
    return s.a.wait_job(s.j1, "FINISHED", 60)


def test_1_job_entry_then_clean(s):
    return s.reader.wait_state(f"{s.jr_a}/{s.j1}", "clean", 30)


def test_1_application_entry_then_clean(s):
    return s.reader.wait_state(f"{s.ar_a}/{s.j1}", "clean", 30)


def test_1_stored_job_result_equals_flinks_execution_result(s):
    return compare_job(s.reader, f"{s.jr_a}/{s.j1}", s.a.rest, s.j1)


def test_1_stored_application_result_matches_flinks_application(s):
    return compare_app(s.reader, f"{s.ar_a}/{s.j1}", s.a.rest, s.j1)


def test_1_application_entry_finished(s):
    return s.reader.field(f"{s.ar_a}/{s.j1}", "result.application-state", "FINISHED")


# (2) a failing job --------------------------------------------------------------------------------

@pytest.mark.required
def test_2_failing_job_submitted(s):
    s.j2 = s.a.submit(100000, 100, "probe-failing", 0, 50)
    return s.j2


def test_2_flink_reports_job_failed(s):
    return s.a.wait_job(s.j2, "FAILED", 60)


def test_2_job_entry_ends_clean(s):
    return s.reader.wait_state(f"{s.jr_a}/{s.j2}", "clean", 30)


def test_2_stored_entry_carries_failed_and_flinks_failure_cause(s):
    return compare_failure(s.reader, f"{s.jr_a}/{s.j2}", s.a.rest, s.j2, "intentional failure after 50 records")


def test_2_stored_job_result_equals_flinks_execution_result(s):
    return compare_job(s.reader, f"{s.jr_a}/{s.j2}", s.a.rest, s.j2)


def test_2_application_entry_ends_clean_with_state_failed(s):
    s.reader.wait_state(f"{s.ar_a}/{s.j2}", "clean", 30)
    return s.reader.field(f"{s.ar_a}/{s.j2}", "result.application-state", "FAILED")


# (3) recovery -------------------------------------------------------------------------------------

@pytest.mark.required
def test_3_job_submitted_its_entries_dirty_while_mark_clean_held(s):
    """The job entry and the application entry."""
    s.j3 = submitted_held(s, 200, 100, "probe-recovered")
    return "; ".join(f"{entry} entry {s.reader.wait_state(entry_url(s, entry, s.j3), 'dirty', 10)}"
                     for entry in ("job", "application"))


def test_3_flink_could_not_mark_clean_with_jobstore_stopped(s):
    """jobstore stopped, then Flink's mark-clean released: it goes to a stopped jobstore; Flink
    logs that it could not mark the result clean."""
    s.js.stop()
    s.proxy.release()
    return flinklib.wait_log(s.jm_a, f"Could not properly mark job {s.j3} result as clean", 60)


def test_3_jobmanager_survived_failed_mark_clean(s):
    expect(status_of(s.a.rest + "/overview") == 200, "no answer from /overview")
    return "REST answers"


@pytest.mark.required
def test_3_jobstore_back_on_same_database(s):
    return s.js.start()


def test_3_job_entry_still_dirty(s):
    return s.reader.field(f"{s.jr_a}/{s.j3}", "state", "dirty")


def test_3_application_entry_still_dirty(s):
    return s.reader.field(f"{s.ar_a}/{s.j3}", "state", "dirty")


# (4, first half) cluster B starts while A has dirty entries ----------------------------------------

@pytest.mark.required
def test_4_cluster_b_started(ctx, s):
    """Talking to jobstore directly, its token from jobstore.token-file."""
    s.b = ctx.cluster("flink-B", plugin_conf(s.cluster_b, s.js.url, {"jobstore.token-file": s.token_file}),
                      extra_jars=[ctx.flink().plugin_jar()])
    return f"at {s.b.start().rest}"


def test_4_b_finds_none_of_as_dirty_job_results(s):
    return flinklib.log_line(s.b.jms[0], f"Found 0 dirty job result(s) in jobstore (cluster {s.cluster_b})")


def test_4_b_finds_none_of_as_dirty_application_results(s):
    return flinklib.log_line(s.b.jms[0], f"Found 0 dirty application result(s) in jobstore (cluster {s.cluster_b})")


# (3, second half) A's JobManager restarted --------------------------------------------------------

@pytest.mark.required
def test_3_jobmanager_a_restarted(s):
    """The TaskManager registered again."""
    t0 = time.time()
    s.a.restart_jobmanager(s.jm_a)
    return f"in {time.time() - t0:.0f} s"


def test_3_new_jobmanager_found_dirty_job_result(s):
    return flinklib.wait_log(s.jm_a, f"Found 1 dirty job result(s) in jobstore (cluster {s.cluster_a})", 30)


def test_3_new_jobmanager_found_dirty_application_result(s):
    return flinklib.wait_log(s.jm_a, f"Found 1 dirty application result(s) in jobstore (cluster {s.cluster_a})", 30)


def test_3_job_entry_ends_clean(s):
    return s.reader.wait_state(f"{s.jr_a}/{s.j3}", "clean", 60)


def test_3_application_entry_ends_clean(s):
    return s.reader.wait_state(f"{s.ar_a}/{s.j3}", "clean", 60)


def test_3_recovered_entry_kept_flinks_result(s):
    return s.reader.field(f"{s.jr_a}/{s.j3}", "result.name", "probe-recovered")


def test_3_no_fatal_error_in_new_jobmanager(s):
    expect(not s.jm_a.fatal_lines(), snippet("; ".join(s.jm_a.fatal_lines()), 300))
    return f"no fatal error in {os.path.basename(s.jm_a.log_file())}"


def test_3_jobmanager_up_after_recovery(s):
    expect(get_json(s.a.rest + "/overview").get("taskmanagers") == 1, "not 1 TaskManager")
    return "REST /overview: 1 TaskManager"


# (4, second half) B runs a job with A's job id ------------------------------------------------------

def test_4_b_accepts_job_with_as_job_id(s):
    """B does not see A's entries."""
    job, cause = run_with_id(s.b, s.j1, 100, 100, "probe-b-same-id")
    expect(job == s.j1, f"REJECTED: {cause}")
    return job


def test_4_bs_job_with_as_job_id_finishes(s):
    return s.b.wait_job(s.j1, "FINISHED", 60)


def test_4_bs_entry_ends_clean_under_cluster_b(s):
    return s.reader.wait_state(f"{s.jr_b}/{s.j1}", "clean", 30)


def test_4_bs_entry_is_bs_job(s):
    return s.reader.field(f"{s.jr_b}/{s.j1}", "result.name", "probe-b-same-id")


def test_4_as_entry_still_as_job(s):
    return s.reader.field(f"{s.jr_a}/{s.j1}", "result.name", "probe-bounded")


def exactly(s, url, key, id_field, want, what):
    got = s.reader.ids(url, key, id_field)
    expect(got == sorted(want), f"{got}, expected {sorted(want)}")
    return f"{len(got)} {what}"


def test_4_as_job_results_exactly_as_three_jobs(s):
    return exactly(s, f"{s.jr_a}?state=all", "job-results", "job-id", [s.j1, s.j2, s.j3], "entries")


def test_4_bs_job_results_exactly_bs_one_job(s):
    return exactly(s, f"{s.jr_b}?state=all", "job-results", "job-id", [s.j1], "entry")


def test_4_bs_application_results_exactly_bs_one_application(s):
    return exactly(s, f"{s.ar_b}?state=all", "application-results", "application-id", [s.j1], "entry")


def test_4_control_a_refuses_job_with_that_id(s):
    """A (restarted, so only jobstore remembers the job id) refuses a job with that id."""
    job, cause = run_with_id(s.a, s.j1, 100, 100, "probe-a-again")
    expect(job is None, f"A accepted it as job {job}")
    expect("DuplicateApplicationSubmissionException" in cause, f"refused for another reason: {cause}")
    return f"REJECTED: {cause}"


def test_4_as_token_refused_on_bs_entries(s):
    """A's token (write <A's cluster id>) on B's entries: 403."""
    expect(status_of(f"{s.jr_b}?state=all", token=s.token_a) == 403, "not 403")
    return "403"
