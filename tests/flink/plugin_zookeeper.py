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
import os
import re
import time

import flink as flinklib
from flink import LEADER_LINE, PLUGIN_FACTORY
from ha import (api_state, check_recovery, entry, failover, in_use_replica, no_fatal, probe_job, sql_state, start_pair,
                wait_api_state, write_bench, zookeeper_failover)
from harness import expect, http, log, random_hex, snippet, status_of, wait_for


def run(ctx):
    flink = ctx.flink()
    ctx.require("plugin, its test classes and the probe job built", lambda: flink.test_classpath() and flink.probe_jar()
                and f"{os.path.basename(flink.plugin_jar())} and the probe job against Flink at {flink.home}")
    zk = ctx.zookeeper()
    figures = {}

    db = ctx.postgres.create_database("jobstore_plugin_zk")
    r1, r2 = ctx.jobstore("jobstore-1", db.url()), ctx.jobstore("jobstore-2", db.url())
    ctx.require("jobstore replica 1 on PostgreSQL database " + db.name, r1.start)
    ctx.require("jobstore replica 2 on the same database", r2.start)
    p1 = ctx.require("FaultProxy in front of replica 1", lambda: flinklib.FaultProxy(flink, "proxy-1", r1.url, ctx.scratch))
    replicas = f"{p1.url},{r2.url}"
    ctx.ok(f"jobstore.url: {replicas} (replica 1 through FaultProxy, replica 2 direct)")

    run_id = random_hex(3)
    cid = f"zk-plugin-{run_id}"
    ckdir = ctx.path("checkpoints-plugin")
    common = {
        "high-availability.zookeeper.quorum": zk.quorum,
        "high-availability.zookeeper.path.root": "/flink",
        "high-availability.zookeeper.client.session-timeout": "6 s",
        "high-availability.zookeeper.client.connection-timeout": "5 s",
        "execution.checkpointing.num-retained": "1",
    }
    plugin = ctx.cluster("plugin", dict(common, **{
        "high-availability.type": PLUGIN_FACTORY,
        "jobstore.ha.mode": "zookeeper",
        "jobstore.url": replicas,
        "jobstore.timeout": "5 s",
        "jobstore.retries": "2",
        "jobstore.retry-backoff": "200 ms",
        "high-availability.cluster-id": cid,
        "high-availability.storageDir": f"file://{ctx.path('ha-plugin')}",
        "execution.checkpointing.dir": f"file://{ckdir}",
    }), jobmanagers=2, extra_jars=[flink.plugin_jar()])
    leader, standby = start_pair(ctx, plugin, "plugin cluster, jobstore.ha.mode zookeeper")

    def one_leader():
        time.sleep(3)
        expect(leader.leads() and not standby.leads(),
               f"leader logs: {leader.name}={leader.leads()} {standby.name}={standby.leads()}")
        return f"{leader.name} leads, {standby.name} is standby (only {leader.name} logged '{LEADER_LINE}')"
    ctx.check("(1) exactly one JobManager leads", one_leader)
    services = ("jobstore.ha.mode zookeeper: Flink's "
                "org.apache.flink.runtime.highavailability.zookeeper.ZooKeeperLeaderElectionHaServices")
    ctx.check("(1) the plugin builds Flink's ZooKeeper services in both JobManagers", lambda: expect(
        all(services in j.log_text() for j in plugin.jms), "not in both JobManager logs")
        and "ZooKeeperLeaderElectionHaServices in both JobManager logs")
    ctx.check("(1) ... and in the TaskManager", lambda: expect(
        "ZooKeeperLeaderElectionHaServices" in plugin.tm.log_text(), "not in the TaskManager log"))

    # (1) failover ------------------------------------------------------------------------------
    job = ctx.require("(1) a checkpointed unbounded job runs, 2 checkpoints complete", probe_job, plugin, leader, ckdir)
    box = []

    def first_failover():
        box.append(failover(plugin, job, ckdir))
        r = box[0]
        return f"{r[1].name} leads {r[3]:.1f}s after the kill, job {job} RUNNING again after {r[4]:.1f}s"
    ctx.require("(1) SIGKILL of the leader: the standby takes over and the job runs again under the same job id",
                first_failover)
    old, new, latest, t_leader, t_running, load = box[0]
    figures["plugin"] = {"leader_answering_s": round(t_leader, 1), "job_running_s": round(t_running, 1),
                         "load": round(load, 2)}
    check_recovery(ctx, "(1)", plugin, job, ckdir, old, new, latest)

    old.start()

    def restarted_standby():
        wait_for(f"restarted {old.name}'s REST endpoint", lambda: status_of(old.rest + "/overview") == 200, 180, 0.5)
        time.sleep(3)
        expect(not old.leads(), f"restarted {old.name} leads")
        expect(new.leads(), f"{new.name} no longer leads")
        return f"{old.name} (new pid {old.proc.pid}) is a standby, {new.name} still leads"
    ctx.check("(1) the killed JobManager, restarted, is a standby", restarted_standby)

    # cancel: dirty then clean with CANCELED
    p1.hold()
    status, body = http("PATCH", f"{new.rest}/jobs/{job}?mode=cancel")
    ctx.check("(1) cancel accepted", lambda: expect(status == 202, f"HTTP {status} {snippet(body, 200)}") and "HTTP 202")
    ctx.check("(1) Flink marks the result clean (request held at the proxy)", p1.wait_held)
    ctx.check("(1) entry dirty with CANCELED, through the API", api_state, r2.url, cid, job, "dirty", "CANCELED")
    ctx.check("(1) entry dirty with CANCELED, in SQL", sql_state, db, cid, job, "dirty", "CANCELED")
    p1.release()
    ctx.check("(1) entry clean with CANCELED, through the API", wait_api_state, r2.url, cid, job, "clean", "CANCELED", 60)
    ctx.check("(1) entry clean with CANCELED, in SQL", sql_state, db, cid, job, "clean", "CANCELED")
    ctx.check("(1) Flink reports the job CANCELED", lambda: wait_for(
        "CANCELED", lambda: plugin.job_state(job, new)[0] == "CANCELED", 60) and "CANCELED")

    # (2) dirty-entry recovery ----------------------------------------------------------------------
    leader = plugin.leader()
    other = plugin.others(leader)[0]
    ctx.check("(2) the leader's plugin uses replica 1 (through the proxy)", lambda: expect(
        in_use_replica(leader) == p1.url, f"in use: {in_use_replica(leader)}") and p1.url)
    p1.hold()
    j2 = ctx.require("(2) a bounded job is submitted", lambda: plugin.submit(100, 100, "probe-recovered", jm=leader))
    ctx.check("(2) Flink marks the result clean (held)", p1.wait_held, 90)
    ctx.check("(2) entry dirty (API)", api_state, r2.url, cid, j2, "dirty", "SUCCEEDED")
    r1.stop()
    r2.stop()
    log("(2) both jobstore replicas stopped; releasing Flink's mark-clean")
    p1.release()
    ctx.check("(2) jobstore unreachable: Flink could not mark the result clean and logged it",
              lambda: flinklib.wait_log(leader, f"Could not properly mark job {j2} result as clean", 90) and "logged")
    ctx.require("(2) jobstore replica 1 back", r1.start)
    ctx.require("(2) jobstore replica 2 back", r2.start)
    ctx.check("(2) entry still dirty (API)", api_state, r2.url, cid, j2, "dirty", "SUCCEEDED")
    ctx.check("(2) entry still dirty (SQL)", sql_state, db, cid, j2, "dirty", "SUCCEEDED")
    leader.kill()
    log(f"(2) SIGKILL leader {leader.name}")
    ctx.check("(2) the standby takes over", lambda: wait_for("leads", other.leads, 180) and f"{other.name} leads")
    ctx.check("(2) the new leader found the dirty entry through jobstore", lambda: wait_for(
        "log", lambda: re.search(r"Found [1-9]\d* dirty job result\(s\) in jobstore", other.log_text()), 120).group(0))
    ctx.check("(2) the new leader finished the cleanup: entry clean (API)", wait_api_state, r2.url, cid, j2, "clean",
              "SUCCEEDED", 120)
    ctx.check("(2) entry clean (SQL)", sql_state, db, cid, j2, "clean", "SUCCEEDED")
    ctx.check("(2) no fatal error in the new leader", no_fatal, other)
    leader.start()  # back as a standby for (3)

    # (3) replicas -----------------------------------------------------------------------------------
    lead = plugin.leader() or other
    wait_for("the restarted JobManager's REST endpoint", lambda: status_of(leader.rest + "/overview") == 200, 180, 0.5)
    lead_pid = lead.proc.pid
    jobs3 = []

    def batch(label, kill, expect_url):
        in_use = in_use_replica(lead)
        expect(in_use == expect_url, f"replica in use is {in_use}, expected {expect_url}")
        ids = [plugin.submit(100 + 100 * k, 100, f"probe-replica-{label}-{k}", jm=lead) for k in range(3)]
        jobs3.extend(ids)
        kill.kill()
        return f"replica in use {in_use}: SIGKILLed (pid {kill.proc.pid}) while {len(ids)} jobs run out"

    def all_clean(js, n):
        expect(len(jobs3) == n, f"{len(jobs3)} jobs submitted, expected {n}")
        wait_for("all clean", lambda: all((entry(js.url, cid, j) or {}).get("state") == "clean" for j in jobs3), 120)
        return f"{n} entries clean: " + " ".join(j[:8] for j in jobs3)

    def switched_back():
        lines = [x for x in lead.log_text().splitlines() if f"jobstore replica {r2.url} failed" in x]
        expect(in_use_replica(lead) == p1.url and lines,
               f"in use: {in_use_replica(lead)}; failures of replica 2 logged: {len(lines)}")
        return "logged: " + lines[0].split(" - ", 1)[-1][:160]

    def all_in_sql():
        ids = ",".join(f"'{i}'" for i in jobs3) or "''"
        expect(len(jobs3) == 6, f"{len(jobs3)} jobs submitted, expected 6")
        rows = int(db.sql(f"SELECT count(*) FROM job_results WHERE cluster_id = '{cid}' AND state = 'clean' "
                          f"AND result->>'application-status' = 'SUCCEEDED' AND job_id IN ({ids})"))
        expect(rows == len(jobs3), f"{rows} rows")
        return f"{rows} clean rows with the results"

    def no_failover():
        expect(lead.alive() and lead.proc.pid == lead_pid, "the leader process is gone")
        expect(lead.log_text().count(LEADER_LINE) == 1, "the leader was granted leadership again")
        standby3 = plugin.others(lead)[0]
        expect(not standby3.leads(), f"{standby3.name} was granted leadership")
        no_fatal(lead)
        return f"{lead.name} (pid {lead_pid}) led throughout, {standby3.name} stayed standby, no fatal error"

    ctx.check("(3a) SIGKILL of replica 1 (in use, behind the proxy) while 3 jobs terminate", batch, "a", r1, p1.url)
    ctx.check("(3a) every result lands (clean in jobstore, through replica 2)", all_clean, r2, 3)
    ctx.check("(3a) the plugin switched to replica 2", lambda: expect(
        in_use_replica(lead) == r2.url, str(in_use_replica(lead))) and r2.url)
    ctx.require("(3b) replica 1 restarted", r1.start)
    ctx.check("(3b) SIGKILL of replica 2 (in use, direct: connection refused) while 3 jobs terminate", batch, "b", r2, r2.url)
    ctx.check("(3b) every result lands (clean in jobstore, through replica 1)", all_clean, r1, 6)
    ctx.check("(3b) the plugin switched back to replica 1", switched_back)
    ctx.check("(3) every result landed, in SQL", all_in_sql)
    ctx.check("(3) every job FINISHED in Flink", lambda: expect(len(jobs3) == 6 and all(
        plugin.job_state(j, lead)[0] == "FINISHED" for j in jobs3), "not every job FINISHED") and f"{len(jobs3)} FINISHED")
    ctx.check("(3) no JobManager failed over because of the replicas", no_failover)
    plugin.stop()

    # (4) Flink's own ZooKeeper HA, same scenario ----------------------------------------------------
    baseline = zookeeper_failover(ctx, "flink-zk", "(4) baseline:", {
        k: v for k, v in common.items() if k.startswith("high-availability.zookeeper.client.")})
    if baseline:
        figures["flink"] = baseline

    if "plugin" in figures and "flink" in figures:
        pf, ff = figures["plugin"], figures["flink"]
        ctx.ok(f"(4) failover times (SIGKILL of the leader -> standby's REST answers as leader / job RUNNING again): "
               f"plugin zookeeper mode {pf['leader_answering_s']} s / {pf['job_running_s']} s; "
               f"Flink's high-availability.type zookeeper {ff['leader_answering_s']} s / {ff['job_running_s']} s "
               f"(ZooKeeper session timeout 6 s)")
    write_bench("plugin-zookeeper", figures)
