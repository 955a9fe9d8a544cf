"""The plugin's `jobstore.ha.mode: zookeeper` on a real ZooKeeper.

A real ZooKeeper (Debian's `zookeeper` package), two jobstore replicas on one fresh PostgreSQL
database, and Flink 2.3.0 clusters of two JobManagers and one TaskManager on 127.0.0.1:

  (1) failover: exactly one JobManager leads; a checkpointed unbounded job runs; SIGKILL of the
      leader: the standby takes over, the job runs again under the same job id, restored from its
      latest checkpoint (checkpoint ids continue); the killed JobManager, restarted, is a standby.
      Cancelling the job: its jobstore entry is dirty, then clean, with CANCELED (API and SQL).
  (2) dirty-entry recovery: jobstore unreachable when a job's result is marked clean; the leader
      is killed; the new leader finds the dirty entry through jobstore and finishes the cleanup.
  (3) replicas: `jobstore.url` lists two replicas; the one in use is SIGKILLed while jobs
      terminate (twice: once behind a proxy answering 502, once direct: connection refused):
      every result lands, no JobManager fails over.
  (4) the failover times (leader answering, job running again) beside Flink's own
      `high-availability.type: zookeeper` in the same run (BENCH_OUT=FILE writes them as JSON).

Flink reaches replica 1 through FaultProxy (pass-through; it can hold mark-clean requests so the
dirty state can be observed, and answers 502 while its jobstore is down) and replica 2 directly:
jobstore.url = "http://<proxy>,http://<replica 2>".
"""
import json
import os
import re
import time

import pytest

import flink as flinklib
from flink import LEADER_LINE, PLUGIN_FACTORY
from ha import (api_state, checkpoints_continue, entry, failover, flink_list, in_use_replica, no_fatal,
                probe_job, restored_from, sql_state, start_pair, wait_api_state, write_bench)
from harness import expect, http, log, random_hex, snippet, status_of, wait_for
from steps import ZooKeeperBaselineSteps


COMMON = {
    "high-availability.zookeeper.client.session-timeout": "6 s",
    "high-availability.zookeeper.client.connection-timeout": "5 s",
    "execution.checkpointing.num-retained": "1",
}


@pytest.fixture(scope="module", autouse=True)
def figures(s):
    """The failover figures, written to BENCH_OUT at the end of the suite."""
    s.figures = {}
    yield s.figures
    write_bench("plugin-zookeeper", s.figures)


@pytest.mark.required
def test_plugin_test_classes_and_probe_job_built(ctx):
    return ctx.plugin_built()


@pytest.mark.required
def test_zookeeper_serves(ctx):
    """The run's ZooKeeper (Debian's zookeeper package, installed when missing)."""
    zk = ctx.zookeeper()
    return f"ZooKeeper {zk.version()} at {zk.quorum} (pid {zk.proc.pid})"


@pytest.mark.required
def test_jobstore_replica_1(ctx, s):
    s.db = ctx.postgres.create_database("jobstore_plugin_zk")
    s.r1, s.r2 = ctx.jobstore("jobstore-1", s.db.url()), ctx.jobstore("jobstore-2", s.db.url())
    return f"database {s.db.name}, {s.r1.start()}"


@pytest.mark.required
def test_jobstore_replica_2_on_same_database(s):
    return s.r2.start()


@pytest.mark.required
def test_fault_proxy_in_front_of_replica_1(ctx, s):
    s.p1 = flinklib.FaultProxy(ctx.flink(), "proxy-1", s.r1.url, ctx.scratch)
    s.replicas = f"{s.p1.url},{s.r2.url}"
    return f"jobstore.url: {s.replicas} (replica 1 through FaultProxy, replica 2 direct)"


@pytest.mark.required
def test_plugin_cluster_starts(ctx, s):
    """Two JobManagers and one TaskManager with jobstore.ha.mode zookeeper; one leads."""
    s.cid = f"zk-plugin-{random_hex(3)}"
    s.ckdir = ctx.path("checkpoints-plugin")
    s.plugin = ctx.cluster("plugin", dict(COMMON, **{
        "high-availability.zookeeper.quorum": ctx.zookeeper().quorum,
        "high-availability.zookeeper.path.root": "/flink",
        "high-availability.type": PLUGIN_FACTORY,
        "jobstore.ha.mode": "zookeeper",
        "jobstore.url": s.replicas,
        "jobstore.timeout": "5 s",
        "jobstore.retries": "2",
        "jobstore.retry-backoff": "200 ms",
        "high-availability.cluster-id": s.cid,
        "high-availability.storageDir": f"file://{ctx.path('ha-plugin')}",
        "execution.checkpointing.dir": f"file://{s.ckdir}",
    }), jobmanagers=2, extra_jars=[ctx.flink().plugin_jar()])
    s.leader, s.standby, detail = start_pair(s.plugin, "plugin cluster, jobstore.ha.mode zookeeper")
    return detail


# (1) failover -------------------------------------------------------------------------------------

def test_1_exactly_one_jobmanager_leads(s):
    time.sleep(3)
    expect(s.leader.leads() and not s.standby.leads(),
           f"leader logs: {s.leader.name}={s.leader.leads()} {s.standby.name}={s.standby.leads()}")
    return f"{s.leader.name} leads, {s.standby.name} is standby (only {s.leader.name} logged '{LEADER_LINE}')"


def test_1_plugin_builds_flinks_zookeeper_services_in_both_jobmanagers(s):
    services = ("jobstore.ha.mode zookeeper: Flink's "
                "org.apache.flink.runtime.highavailability.zookeeper.ZooKeeperLeaderElectionHaServices")
    expect(all(services in j.log_text() for j in s.plugin.jms), "not in both JobManager logs")
    return "ZooKeeperLeaderElectionHaServices in both JobManager logs"


def test_1_and_in_the_taskmanager(s):
    expect("ZooKeeperLeaderElectionHaServices" in s.plugin.tm.log_text(), "not in the TaskManager log")


@pytest.mark.required
def test_1_checkpointed_unbounded_job_runs(s):
    """2 checkpoints complete."""
    s.job = probe_job(s.plugin, s.leader, s.ckdir)
    return f"job {s.job}"


@pytest.mark.required
def test_1_sigkill_of_leader_standby_takes_over(s):
    """The standby takes over and the job runs again under the same job id."""
    s.old, s.new, s.latest, t_leader, t_running, load = failover(s.plugin, s.job, s.ckdir)
    s.figures["plugin"] = {"leader_answering_s": round(t_leader, 1), "job_running_s": round(t_running, 1),
                           "load": round(load, 2)}
    return f"{s.new.name} leads {t_leader:.1f}s after the kill, job {s.job} RUNNING again after {t_running:.1f}s"


def test_1_job_restored_from_latest_checkpoint_before_kill(s):
    """Flink's latest.restored.id."""
    return restored_from(s.plugin, s.job, s.new, s.latest)


def test_1_checkpoint_ids_continue_after_restore(s):
    return checkpoints_continue(s.ckdir, s.job, s.latest)


def test_1_flink_list_with_killed_jobmanagers_configuration_finds_job(s):
    """Through the client HA services."""
    return flink_list(s.plugin.flink, s.old, s.job, os.path.join(s.plugin.dir, "cli-log"))


def test_1_killed_jobmanager_restarted_is_standby(s):
    s.old.start()
    wait_for(f"restarted {s.old.name}'s REST endpoint", lambda: status_of(s.old.rest + "/overview") == 200, 180, 0.5)
    time.sleep(3)
    expect(not s.old.leads(), f"restarted {s.old.name} leads")
    expect(s.new.leads(), f"{s.new.name} no longer leads")
    return f"{s.old.name} (new pid {s.old.proc.pid}) is a standby, {s.new.name} still leads"


def test_1_cancel_accepted(s):
    """With Flink's mark-clean held at the proxy."""
    s.p1.hold()
    status, body = http("PATCH", f"{s.new.rest}/jobs/{s.job}?mode=cancel")
    expect(status == 202, f"HTTP {status} {snippet(body, 200)}")
    return "HTTP 202"


def test_1_flink_marks_result_clean_held(s):
    return s.p1.wait_held()


def test_1_entry_dirty_with_canceled_api(s):
    return api_state(s.r2.url, s.cid, s.job, "dirty", "CANCELED")


def test_1_entry_dirty_with_canceled_sql(s):
    try:
        return sql_state(s.db, s.cid, s.job, "dirty", "CANCELED")
    finally:
        s.p1.release()


def test_1_entry_clean_with_canceled_api(s):
    return wait_api_state(s.r2.url, s.cid, s.job, "clean", "CANCELED", 60)


def test_1_entry_clean_with_canceled_sql(s):
    return sql_state(s.db, s.cid, s.job, "clean", "CANCELED")


def test_1_flink_reports_job_canceled(s):
    wait_for("CANCELED", lambda: s.plugin.job_state(s.job, s.new)[0] == "CANCELED", 60)
    return "CANCELED"


def test_1_application_entry_clean_too(s):
    """Flink 2.3 marks the job's application (a job submitted alone is an application of the job's
    id) clean after the job: (2) holds mark-cleans again only once it is, so that what (2) holds
    is its own job's (a CI run held this one there)."""
    url = f"{s.r2.url}/v1/clusters/{s.cid}/application-results/{s.job}"

    def state():
        status, body = http("GET", url)
        return json.loads(body).get("state") if status == 200 else None
    wait_for("the application's entry clean", lambda: state() == "clean", 60)
    return "application entry clean"


# (2) dirty-entry recovery ------------------------------------------------------------------------

def test_2_leaders_plugin_uses_replica_1(s):
    """Through the proxy."""
    s.leader = s.plugin.leader()
    s.other = s.plugin.others(s.leader)[0]
    expect(in_use_replica(s.leader) == s.p1.url, f"in use: {in_use_replica(s.leader)}")
    return s.p1.url


@pytest.mark.required
def test_2_bounded_job_submitted(s):
    """With Flink's mark-clean held at the proxy."""
    s.p1.hold()
    s.j2 = s.plugin.submit(100, 100, "probe-recovered", jm=s.leader)
    return s.j2


def test_2_flink_marks_result_clean_held(s):
    return s.p1.wait_held(90)


def test_2_entry_dirty_api(s):
    return api_state(s.r2.url, s.cid, s.j2, "dirty", "SUCCEEDED")


def test_2_jobstore_unreachable_flink_could_not_mark_clean(s):
    """Both replicas stopped, then Flink's mark-clean released: Flink logs that it could not mark
    the result clean."""
    s.r1.stop()
    s.r2.stop()
    log("(2) both jobstore replicas stopped; releasing Flink's mark-clean")
    s.p1.release()
    flinklib.wait_log(s.leader, f"Could not properly mark job {s.j2} result as clean", 90)
    return "logged"


@pytest.mark.required
def test_2_jobstore_replica_1_back(s):
    return s.r1.start()


@pytest.mark.required
def test_2_jobstore_replica_2_back(s):
    return s.r2.start()


def test_2_entry_still_dirty_api(s):
    return api_state(s.r2.url, s.cid, s.j2, "dirty", "SUCCEEDED")


def test_2_entry_still_dirty_sql(s):
    return sql_state(s.db, s.cid, s.j2, "dirty", "SUCCEEDED")


def test_2_leader_killed_standby_takes_over(s):
    s.leader.kill()
    log(f"(2) SIGKILL leader {s.leader.name}")
    wait_for("leads", s.other.leads, 180)
    return f"{s.other.name} leads"


def test_2_new_leader_found_dirty_entry_through_jobstore(s):
    return wait_for("log", lambda: re.search(r"Found [1-9]\d* dirty job result\(s\) in jobstore",
                                             s.other.log_text()), 120).group(0)


def test_2_new_leader_finished_cleanup_entry_clean_api(s):
    return wait_api_state(s.r2.url, s.cid, s.j2, "clean", "SUCCEEDED", 120)


def test_2_entry_clean_sql(s):
    return sql_state(s.db, s.cid, s.j2, "clean", "SUCCEEDED")


def test_2_no_fatal_error_in_new_leader(s):
    return no_fatal(s.other)


# (3) replicas -------------------------------------------------------------------------------------

@pytest.mark.required
def test_3_killed_jobmanager_back_as_standby(s):
    """The JobManager killed in (2) started again; the leader that (3) watches."""
    s.leader.start()
    s.lead = s.plugin.leader() or s.other
    wait_for("the restarted JobManager's REST endpoint", lambda: status_of(s.leader.rest + "/overview") == 200, 180, 0.5)
    s.lead_pid = s.lead.proc.pid
    s.jobs3 = []
    return f"{s.leader.name} (pid {s.leader.proc.pid}) up, {s.lead.name} (pid {s.lead_pid}) leads"


def batch(s, label, kill, expect_url):
    in_use = in_use_replica(s.lead)
    expect(in_use == expect_url, f"replica in use is {in_use}, expected {expect_url}")
    ids = [s.plugin.submit(100 + 100 * k, 100, f"probe-replica-{label}-{k}", jm=s.lead) for k in range(3)]
    s.jobs3.extend(ids)
    kill.kill()
    return f"replica in use {in_use}: SIGKILLed (pid {kill.proc.pid}) while {len(ids)} jobs run out"


def all_clean(s, js, n):
    expect(len(s.jobs3) == n, f"{len(s.jobs3)} jobs submitted, expected {n}")
    wait_for("all clean", lambda: all((entry(js.url, s.cid, j) or {}).get("state") == "clean" for j in s.jobs3), 120)
    return f"{n} entries clean: " + " ".join(j[:8] for j in s.jobs3)


def test_3a_sigkill_of_replica_1_in_use_while_3_jobs_terminate(s):
    """Replica 1 is behind the proxy: it answers 502."""
    return batch(s, "a", s.r1, s.p1.url)


def test_3a_every_result_lands_through_replica_2(s):
    return all_clean(s, s.r2, 3)


def test_3a_plugin_switched_to_replica_2(s):
    expect(in_use_replica(s.lead) == s.r2.url, str(in_use_replica(s.lead)))
    return s.r2.url


@pytest.mark.required
def test_3b_replica_1_restarted(s):
    return s.r1.start()


def test_3b_sigkill_of_replica_2_in_use_while_3_jobs_terminate(s):
    """Replica 2 is direct: connection refused."""
    return batch(s, "b", s.r2, s.r2.url)


def test_3b_every_result_lands_through_replica_1(s):
    return all_clean(s, s.r1, 6)


def test_3b_plugin_switched_back_to_replica_1(s):
    lines = [x for x in s.lead.log_text().splitlines() if f"jobstore replica {s.r2.url} failed" in x]
    expect(in_use_replica(s.lead) == s.p1.url and lines,
           f"in use: {in_use_replica(s.lead)}; failures of replica 2 logged: {len(lines)}")
    return "logged: " + lines[0].split(" - ", 1)[-1][:160]


def test_3_every_result_landed_in_sql(s):
    ids = ",".join(f"'{i}'" for i in s.jobs3) or "''"
    expect(len(s.jobs3) == 6, f"{len(s.jobs3)} jobs submitted, expected 6")
    rows = int(s.db.sql(f"SELECT count(*) FROM job_results WHERE cluster_id = '{s.cid}' AND state = 'clean' "
                        f"AND result->>'application-status' = 'SUCCEEDED' AND job_id IN ({ids})"))
    expect(rows == len(s.jobs3), f"{rows} rows")
    return f"{rows} clean rows with the results"


def test_3_every_job_finished_in_flink(s):
    expect(len(s.jobs3) == 6 and all(s.plugin.job_state(j, s.lead)[0] == "FINISHED" for j in s.jobs3),
           "not every job FINISHED")
    return f"{len(s.jobs3)} FINISHED"


def test_3_no_jobmanager_failed_over_because_of_replicas(s):
    lead = s.lead
    try:
        expect(lead.alive() and lead.proc.pid == s.lead_pid, "the leader process is gone")
        expect(lead.log_text().count(LEADER_LINE) == 1, "the leader was granted leadership again")
        standby3 = s.plugin.others(lead)[0]
        expect(not standby3.leads(), f"{standby3.name} was granted leadership")
        no_fatal(lead)
        return f"{lead.name} (pid {s.lead_pid}) led throughout, {standby3.name} stayed standby, no fatal error"
    finally:
        s.plugin.stop()


# (4) Flink's own ZooKeeper HA, same scenario ------------------------------------------------------

class Test4BaselineFlinksOwnZooKeeperHa(ZooKeeperBaselineSteps):
    """The same scenario on Flink's own high-availability.type zookeeper (the same session and
    connection timeouts)."""

    name, figure = "flink-zk", "flink"
    label = "(4) baseline: Flink's own high-availability.type zookeeper"
    conf = {k: v for k, v in COMMON.items() if k.startswith("high-availability.zookeeper.client.")}


def test_4_failover_times(s):
    """SIGKILL of the leader -> standby's REST answers as leader / job RUNNING again: the plugin's
    zookeeper mode beside Flink's own ZooKeeper HA (ZooKeeper session timeout 6 s)."""
    if not ("plugin" in s.figures and "flink" in s.figures):
        pytest.skip(f"a failover was not measured (figures: {sorted(s.figures)})")
    pf, ff = s.figures["plugin"], s.figures["flink"]
    return (f"plugin zookeeper mode {pf['leader_answering_s']} s / {pf['job_running_s']} s; "
            f"Flink's high-availability.type zookeeper {ff['leader_answering_s']} s / {ff['job_running_s']} s")
